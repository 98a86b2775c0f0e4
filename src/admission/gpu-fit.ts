// Admission's question to the GPU-time model (src/gpu-time/): can this replica start this request within its
// TTFT budget without pushing its batch past the TPOT target, and if not, how long until it could?
//   budget   = the tier's TTFT (admission.ttft_ms_by_tier; prompts over 4,000 tokens at least 1.25 × their
//              idle-replica TTFT) less the time already spent in the admission queue
//   fits     = predicted TTFT ≤ limit, predicted TPOT ≤ the TPOT limit and no stream
//              there pushed past its own TPOT target by this request's prefill (GpuPrediction.harm), where
//              limit = max(ttft_margin × budget, 1.05 × own), own being the request's TTFT there with nothing
//              queued ahead (ttftLimitMs): a request whose own prefill takes most of its budget is served
//              where nothing is queued ahead of it; once queued, the budget left is the limit
//              or, where the model sees everything there (GpuPrediction.seenWhole: nothing decoding, all the
//              prefill ahead its own dispatches), when its worst case fits the budget itself: CERTAIN_SLACK ×
//              GpuPrediction.worstTtftMs (all our prefill there not yet answered counted whole, however much
//              the fluid has drained, its last step filled by later chunks) ≤ budget. The margin is for what
//              the gateway cannot see (the decode step
//              in progress, other gateways' work, later chunks sharing its last step: the seed mix's error);
//              with none of it, holding a request to half its budget only sheds what the replica would serve
//              in time: on an idle demo replica a second 1,500-token prompt (~280 ms, 360 ms at worst) was
//              shed against a 200 ms limit.
//   TPOT limit = tpot_margin applied to the pool (PoolFigures.tpotLimitMs: the share of the headroom above
//              the idle step the margin leaves on the 8B engine it was tuned on), at least what this replica
//              reaches idle for this request (its step at batch 1 over the request's own context); where that
//              passes the target itself (out of reach even idle: reach.ts), 1.05 × it: the request is judged
//              against what an idle replica reaches, as the TTFT's own floor does, and served best effort.
//              Likewise a queued request whose own TTFT passes its whole budget keeps the 1.05 × own floor.
//   waitMs   = the model's time until it would fit (queue ahead drained, ρ decayed, the harmed streams ended);
//              Infinity when never. Every policy's pick is judged so: the per-stream rule is admission's, not
//              kv-aware's alone (kv-aware's fit applies the same rule, so it looks for a replica that passes).
// Thread: the acceptor. Hot path: one prediction per judged replica, no allocation.
import { GpuPrediction, waitUntilFits, type GpuTimeModel } from '../gpu-time/gpu-time-model.ts';
import type { PoolFigures } from '../gpu-time/pool-figures.ts';
import { OWN_TTFT_SLACK, ttftLimitMs } from '../router/filters/headroom-filter.ts';
import type { Decision, RouteRequest } from '../router/types.ts';


/** The worst case's allowance for the learned prefill rate's error (its median holds within ~5 %). */
export const CERTAIN_SLACK = 1.05;

export class GpuFit {
  readonly p = new GpuPrediction();
  /** The last judge() admitted by the worst case (seenWhole), not by the margin: the router's margin-bound fit may disagree. */
  certain = false;
  /** The last judge(): TTFT limit and TPOT limit used (ms), and the model's wait until it would fit. */
  limitMs = 0;
  tpotLimitMs = 0;
  waitMs = 0;

  /** Judges `slot` for `req`, which has waited `waitedMs` already; true when it fits now. */
  judge(gpu: GpuTimeModel, req: RouteRequest, slot: number, cachedBlocks: number, tierMs: number, waitedMs: number, ttftMargin: number, tpotMargin: number): boolean {
    const fig = gpu.figures(req.poolId);
    const p = gpu.predict(req, slot, cachedBlocks, this.p);
    return this.decide(gpu, fig, req, slot, p, fig === undefined ? 0 : gpu.budgetMs(req, tierMs), waitedMs, ttftMargin, tpotMargin);
  }

  /**
   * judge() on a prediction already made (`p`, for `req` on `slot`): kv-aware's scorer asks it of every
   * candidate it has just predicted, so the router's fit and admission's are one rule. worthQueueing and
   * record read this.p: they follow judge(), not decide() on another prediction. `fig` is the pool's figures
   * and `whole` the request's whole TTFT budget (GpuTimeModel.budgetMs), the same for every candidate: the
   * caller reads them once per decision. `wait` false: the caller wants the verdict only (waitMs is left NaN
   * when it does not fit), so a prediction `p` may have its per-stream figures pending (GpuTimeModel.harmOf).
   */
  decide(gpu: GpuTimeModel, fig: PoolFigures | undefined, req: RouteRequest, slot: number, p: GpuPrediction, whole: number, waitedMs: number, ttftMargin: number, tpotMargin: number, wait = true): boolean {
    this.certain = false;
    if (fig === undefined || Number.isNaN(p.ttftMs)) {
      this.waitMs = 0;
      return true;
    }
    const budget = whole - waitedMs;
    const limit = waitedMs === 0 || budget > p.ownTtftMs || p.ownTtftMs > whole ? ttftLimitMs(p.ownTtftMs, budget, ttftMargin) : budget;
    this.limitMs = limit;
    let tpotLimit = fig.tpotLimitMs(tpotMargin);
    const reach = gpu.decode.stepMs(slot, fig, 1, req.promptTokens + req.maxTokens);
    if (reach > fig.tpotTargetMs) tpotLimit = OWN_TTFT_SLACK * reach;
    else if (reach > tpotLimit) tpotLimit = reach;
    this.tpotLimitMs = tpotLimit;
    if (p.tpotMs <= this.tpotLimitMs) {
      // The per-stream pass (harm) only where TTFT and TPOT fit already: it is the prediction's dearest part.
      const inTime = p.ttftMs <= limit;
      if ((inTime || (p.seenWhole && CERTAIN_SLACK * p.worstTtftMs <= budget)) && gpu.harmOf(p) === 0) {
        this.certain = !inTime;
        this.waitMs = 0;
        return true;
      }
    }
    if (!wait) {
      this.waitMs = Number.NaN;
      return false;
    }
    this.waitMs = waitUntilFits(p, limit, this.tpotLimitMs);
    // Streams it would push past their TPOT (stream-slack.ts) end by harmClearMs; not before then.
    if (gpu.harmOf(p) > 0 && p.harmClearMs > this.waitMs) this.waitMs = p.harmClearMs;
    return false;
  }

  /**
   * Whether waiting `waitMs` and then starting would still meet the limit the last judge() used, with one
   * `pollMs` to spare: the queue looks again only that often, so a request with less slack would most likely
   * be shed after waiting instead of at once.
   */
  worthQueueing(pollMs: number): boolean {
    const p = this.p;
    if (!Number.isFinite(this.waitMs)) return false;
    const later = p.ttftMs - this.waitMs;
    return this.waitMs + (later > p.ownTtftMs ? later : p.ownTtftMs) + pollMs <= this.limitMs;
  }

  /** Copies the last prediction into the decision: the model learns from it at the first token. */
  record(d: Decision): void {
    const p = this.p;
    d.gpuTtftMs = p.ttftMs;
    d.gpuTpotMs = p.tpotMs;
    d.gpuStepsMs = p.stepsMs + p.residualMs + p.adapterMs;
    d.gpuWorkAhead = p.workAhead;
    d.gpuOwnWork = p.ownWork;
  }
}
