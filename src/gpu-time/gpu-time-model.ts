// The GPU-time model: what each replica's GPU will do with a request, in milliseconds. One instance per
// gateway thread, shared by admission (src/admission/) and the kv-aware router; fed by the Router's feedback.
// An engine runs steps back to back; each carries one token of every decoding sequence, then up to
// max_num_batched_tokens − batch tokens of prefill chunks, FCFS, and lasts decode step(batch, KV) + prefill
// work in it / prefill rate. So for a request sent where B sequences decode and W equivalent prefill tokens
// are ahead of its first token (the queue ahead plus its own uncached part):
//   TTFT ≈ ceil(W / (budget − B)) × decode step(B + 1) + W / rate   (+ adapter load when not resident)
// and with ρ = prefill work arriving per ms / rate, the batch's TPOT ≈ decode step(batch) / (1 − ρ); per stream,
// which streams its prefill would push past their target (stream-slack.ts).
// It reads the replica table (scrape, through KvEstimator) and the in-flight ledger; it keeps per slot (typed
// arrays, no allocation per request) the prefill queue as a fluid (drained at the scheduler's prefill rate at
// the current batch, never more than the work sent after the last request to see its first token), the
// prefill arriving (a sum decaying with ARRIVAL_WINDOW_MS), each stream's slack record, and the learned
// figures: prefill rate (prefill-rate.ts, from first tokens) and decode step (decode-fit.ts, from inter-token
// time less the prefill done meanwhile). src/gpu-time/README.md has the derivations and the error.
// Thread: the acceptor. Hot path: predict() is one KvEstimator read, five ledger loads, ~30 flops and (unless
// left pending for harmOf) one pass over the replica's streams.
import type { GatewayConfig } from '../config/schema.ts';
import { LEDGER_INFLIGHT, LEDGER_PREFILL_TOKENS, LEDGER_RESERVED_BLOCKS, LEDGER_RUNNING } from '../registry/inflight-ledger.ts';
import { KvEstimator, KvState } from '../router/kv-estimate.ts';
import type { Decision, FleetView, RouteRequest } from '../router/types.ts';
import { DecodeFit } from './decode-fit.ts';
import { kvReplyTokens } from './reply-length/reply-forecast.ts';
import { GpuPrediction, waitUntilFits } from './gpu-prediction.ts';
import { PoolFigures } from './pool-figures.ts';
import { PrefillRates } from './prefill-rate.ts';
import {
  ARRIVAL_WINDOW_MS, FOREIGN_SHARE_MAX, LONG_PROMPT_FACTOR, MAX_SAMPLE_PREFILL_SHARE, MEAN_PROMPT_ALPHA, MIN_DECODE_SAMPLE_TOKENS,
  MIN_RATE_SAMPLE_WORK, OWN_RHO_CAP, RHO_CAP, SHORT_PROMPT_TOKENS, STREAM_TPOT_MARGIN,
} from './model-parameters.ts';
import { StepPhase } from './step-phase.ts';
import { ArrivingPrefill } from './arriving-prefill.ts';
import { StreamSlack } from './stream-slack.ts';
import { PendingSlack } from './pending-slack.ts';

/** Its callers (admission, the kv-aware scorer) take the prediction type from here with the model. */
export { GpuPrediction, waitUntilFits };

export { ARRIVAL_WINDOW_MS, MAX_SAMPLE_PREFILL_SHARE, OWN_RHO_CAP, RHO_CAP, STREAM_TPOT_MARGIN } from './model-parameters.ts';

class PoolState {
  fig: PoolFigures;
  /** Mean prefill work of a request as this gateway dispatches it (its uncached part): EWMA per dispatch. */
  meanPromptWork = Number.NaN;
  /** Prefill work per uncached prompt token of what this gateway dispatches (the attention term's share): EWMA. */
  workPerToken = 1;
  constructor(fig: PoolFigures) {
    this.fig = fig;
  }
}

/** Receives each first token's predicted and observed TTFT (the prediction-error metric). */
export interface GpuTimeMetrics {
  ttftPrediction(pool: string, predictedMs: number, observedMs: number): void;
}

export class GpuTimeModel {
  readonly kv: KvEstimator;
  readonly rates: PrefillRates;
  readonly decode: DecodeFit;
  readonly streams: StreamSlack;
  /** The per-stream pass of the latest prediction, run when asked (harmOf). */
  private readonly slack: PendingSlack;
  metrics: GpuTimeMetrics | null = null;
  private readonly fleet: FleetView;
  private readonly pools = new Map<string, PoolState>();
  private readonly st = new KvState();
  /** Fluid prefill queue per slot: equivalent tokens, when last advanced, and its drain rate (tokens/ms). */
  private readonly backlog: Float64Array;
  private readonly backlogAt: Float64Array;
  private readonly drainPerMs: Float64Array;
  /** Prefill work arriving per slot (ρ): ours, and other gateways' from the scrape. */
  private readonly arriving: ArrivingPrefill;
  /** Cumulative work dispatched per slot; less the fluid backlog, the work prefilled so far (doneWork). */
  private readonly dispatchedWork: Float64Array;
  /** This model's raw prefill tokens in flight before their first token (the ledger's share that is ours). */
  private readonly ownPrefill: Float64Array;
  /** The same requests' equivalent prefill work. */
  private readonly ownPrefillWork: Float64Array;
  private readonly phase: StepPhase;

  constructor(pools: GatewayConfig['pools'], fleet: FleetView, staleMs: number) {
    const slots = fleet.ledger.slots;
    this.fleet = fleet;
    this.kv = new KvEstimator(fleet, slots, staleMs);
    this.rates = new PrefillRates(slots);
    this.decode = new DecodeFit(slots);
    this.streams = new StreamSlack(slots);
    this.slack = new PendingSlack(this.streams);
    this.backlog = new Float64Array(slots);
    this.backlogAt = new Float64Array(slots);
    this.drainPerMs = new Float64Array(slots);
    this.arriving = new ArrivingPrefill(slots);
    this.dispatchedWork = new Float64Array(slots);
    this.ownPrefill = new Float64Array(slots);
    this.ownPrefillWork = new Float64Array(slots);
    this.phase = new StepPhase(slots);
    this.reconfigure(pools);
  }

  /** New nominal figures (config reload); learned ones are kept. */
  reconfigure(pools: GatewayConfig['pools']): void {
    for (const p of pools) {
      const s = this.pools.get(p.id);
      if (s === undefined) this.pools.set(p.id, new PoolState(new PoolFigures(p)));
      else s.fig = new PoolFigures(p);
    }
  }

  figures(poolId: string): PoolFigures | undefined {
    return this.pools.get(poolId)?.fig;
  }

  /** Learned (or nominal) figures of a slot, for the metrics gauges. */
  prefillTokensPerSecond(slot: number, poolId: string): number {
    const fig = this.pools.get(poolId)?.fig;
    return fig === undefined ? Number.NaN : this.rates.rate(slot, fig.prefillTokensPerMs) * 1000;
  }

  decodeFigures(slot: number, poolId: string): { baseMs: number; perSeqMs: number; perKvTokenMs: number } | null {
    const fig = this.pools.get(poolId)?.fig;
    if (fig === undefined) return null;
    const d = this.decode;
    return { baseMs: d.baseMs(slot, fig), perSeqMs: d.perSeqMs(slot, fig), perKvTokenMs: d.perKvTokenMs(slot, fig) };
  }

  /** TTFT budget: `tierMs` (or the pool's target); over 4,000 prompt tokens at least 1.25 × the idle TTFT (the SLO's rule). */
  budgetMs(req: RouteRequest, tierMs?: number): number {
    const fig = this.pools.get(req.poolId)?.fig;
    const base = tierMs ?? req.ttftBudgetMs ?? fig?.ttftTargetMs ?? 400;
    if (fig === undefined || req.promptTokens <= SHORT_PROMPT_TOKENS) return base;
    const idle = LONG_PROMPT_FACTOR * fig.idleTtftMs(req.promptTokens);
    return idle > base ? idle : base;
  }

  /**
   * TTFT and TPOT of `req` on `slot` with `cachedBlocks` of its prompt there. Fills and returns `out`. With
   * `slack` false the per-stream figures (harm, harmClearMs, idleMs) wait for harmOf(out) (pending-slack.ts).
   */
  predict(req: RouteRequest, slot: number, cachedBlocks: number, out: GpuPrediction, slack = true): GpuPrediction {
    const pool = this.pools.get(req.poolId);
    if (pool === undefined) {
      out.ttftMs = out.tpotMs = Number.NaN;
      return out;
    }
    const fig = pool.fig;
    const fleet = this.fleet;
    const ledger = fleet.ledger;
    const st = this.st;
    const now = fleet.nowMs();
    const fresh = this.kv.read(slot, st);
    const foreign = this.arriving.foreign(slot, st);
    if (foreign > 0) this.arriving.add(slot, now, foreign * pool.workPerToken);
    const bs = fig.blockSize;
    const ledgerRunning = ledger.get(slot, LEDGER_RUNNING);
    const inflight = ledger.get(slot, LEDGER_INFLIGHT);
    const batch = fresh && st.running > ledgerRunning ? st.running : ledgerRunning;
    const cached = cachedBlocks * bs < req.promptTokens ? cachedBlocks * bs : 0;
    const own = fig.work(cached, req.promptTokens);
    const rate = this.rates.rate(slot, fig.prefillTokensPerMs);
    // A stale row's KV is not trusted: what this gateway reserved there is all it knows.
    const used = fresh ? st.usedBlocks : ledger.get(slot, LEDGER_RESERVED_BLOCKS);
    const kvTokens = used * bs;
    const step = this.decode.stepMs(slot, fig, batch + 1, kvTokens);
    let chunk = fig.maxBatchedTokens - batch;
    if (chunk < 1) chunk = 1;
    // The fluid queue drains at the prefill throughput of steps carrying this batch.
    this.drainPerMs[slot] = chunk / (step + chunk / rate);
    let ahead = this.advance(slot, now);
    // The ledger is the truth about what still awaits a first token: the fluid never holds more than our
    // share of it; what other acceptor threads sent there (the ledger is shared, our fluid is not) adds.
    const ledgerPrefill = ledger.get(slot, LEDGER_PREFILL_TOKENS);
    const mine = this.ownPrefill[slot]!;
    const cap = mine > 0 ? (ledgerPrefill < mine ? ledgerPrefill : mine) * (this.ownPrefillWork[slot]! / mine) : 0;
    if (ahead > cap) ahead = this.backlog[slot] = cap;
    let unseen = ledgerPrefill > mine;
    if (unseen) ahead += ledgerPrefill - mine;
    // Waiting requests no gateway thread here accounts for (other gateways): each the mean prefill work of
    // what we dispatch, net of its cache hits (the same traffic through another gateway finds the same cache).
    const joining = inflight - ledgerRunning;
    const unaccounted = st.waiting - joining;
    if (fresh && unaccounted > 0) {
      ahead += unaccounted * (Number.isNaN(pool.meanPromptWork) ? fig.work(0, req.promptTokens) : pool.meanPromptWork);
      unseen = true;
    }
    const work = ahead + own;
    const steps = Math.ceil(work / chunk);
    // The scrape's running count includes our requests still prefilling (joining): beyond them, something decodes.
    out.seenWhole = !unseen && batch <= (joining > 0 ? joining : 0);
    const windowCap = OWN_RHO_CAP * rate * ARRIVAL_WINDOW_MS;
    out.rhoArriving = this.arriving.now(slot, now) / (rate * ARRIVAL_WINDOW_MS);
    out.rhoOwn = (own < windowCap ? own : windowCap) / (rate * ARRIVAL_WINDOW_MS);
    out.fresh = fresh;
    out.batch = batch;
    out.inflight = inflight;
    out.usedBlocks = used;
    out.totalBlocks = st.totalBlocks;
    // KV it will hold at its peak: the prompt and its reply's KV figure (reply-length/: a high quantile, not max_tokens).
    const newBlocks = Math.ceil((req.promptTokens + kvReplyTokens(req)) / bs) - cachedBlocks;
    out.kvAfter = !fresh || Number.isNaN(st.totalBlocks) ? Number.NaN : (used + newBlocks) / st.totalBlocks;
    out.workAhead = work;
    out.ownWork = own;
    out.rate = rate;
    out.prefillMs = work / rate;
    out.stepsMs = (steps > 0 ? steps : 1) * step;
    out.adapterMs = req.adapter !== null && !fleet.residentAdapters(slot).includes(req.adapter) ? fig.adapterLoadMs : 0;
    // A busy replica is mid-step when the request arrives: it joins the next one (step-phase.ts). Everything
    // there is ours when no other thread's prefill is ahead and the scrape shows no one else; only decode runs
    // when, besides, nothing of ours awaits a first token.
    const busyRho = out.rhoArriving < RHO_CAP ? out.rhoArriving : RHO_CAP;
    const ownOnly = !unseen && !(fresh && st.running > ledgerRunning + (joining > 0 ? joining : 0));
    // Mostly ours: no other thread's prefill ahead, and what the scrape shows beyond our requests (another
    // gateway's, or ours that ended since that scrape) at most FOREIGN_SHARE_MAX of it.
    const shown = fresh ? st.running + st.waiting : 0;
    const mostlyOwn = ledgerPrefill <= mine && shown - inflight <= FOREIGN_SHARE_MAX * shown;
    out.residualMs = batch > 0 || ahead > 0 ? this.phase.residualMs(slot, now, step, busyRho, ahead <= 0 && ownOnly, mostlyOwn) : 0;
    out.ttftMs = out.prefillMs + out.stepsMs + out.residualMs + out.adapterMs;
    const worstWork = this.ownPrefillWork[slot]! + own;
    const worstSteps = Math.ceil(worstWork / chunk);
    // Each of its steps at worst a full token budget of prefill (its last one topped up by later chunks).
    out.worstTtftMs = (worstSteps > 0 ? worstSteps : 1) * (chunk / rate + step) + out.adapterMs;
    const ownSteps = Math.ceil(own / chunk);
    out.ownTtftMs = own / rate + (ownSteps > 0 ? ownSteps : 1) * step + out.residualMs + out.adapterMs;
    // TPOT once it joins: every request there not yet decoding will be, and the prefill arriving meanwhile.
    out.stepMs = this.decode.stepMs(slot, fig, batch + (joining > 0 ? joining : 0) + 1, (used + newBlocks) * bs);
    // Its own prefill runs before its own first token: it stalls only the sequences decoding (or about to)
    // there. On a replica with none it costs no one's TPOT; counting it there made an idle replica look
    // TPOT-bound to a long prompt, which admission then shed though that replica could serve it.
    let rho = out.rhoArriving + (batch + (joining > 0 ? joining : 0) > 0 ? out.rhoOwn : 0);
    if (rho > RHO_CAP) rho = RHO_CAP;
    out.rho = rho;
    out.tpotMs = out.stepMs / (1 - rho);
    const disp = this.dispatchedWork[slot]!;
    // Each stream is held to STREAM_TPOT_MARGIN of the target, as a share of the headroom above the idle step (pool-figures.ts).
    this.slack.q.set(now, out.stepMs, fig.tpotLimitMs(STREAM_TPOT_MARGIN), rate, chunk, ahead, disp, disp - this.backlog[slot]!, own);
    out.idleKnown = fresh && ownOnly;
    this.slack.pend(slot, out);
    if (slack) this.slack.complete(out);
    return out;
  }

  /** `p.harm` (and harmClearMs, idleMs), computed if predict() left them pending (pending-slack.ts). */
  harmOf(p: GpuPrediction): number {
    return this.slack.complete(p);
  }

  // ---- feedback (the Router forwards its hooks) -------------------------------------------------------

  /** The request was sent to `slot` with the prediction admission put in `d` (gpuOwnWork, gpuTtftMs). */
  dispatched(slot: number, req: RouteRequest, d: Decision): void {
    const pool = this.pools.get(req.poolId);
    if (pool === undefined) return;
    const now = this.fleet.nowMs();
    const uncached = uncachedOf(req, d, pool.fig.blockSize);
    // The prediction's own work; for a policy that predicts nothing, its uncached part's (all of it when cached whole).
    if (!(d.gpuOwnWork > 0)) d.gpuOwnWork = pool.fig.work(uncached > 0 ? req.promptTokens - uncached : 0, req.promptTokens);
    const own = d.gpuOwnWork;
    this.advance(slot, now);
    this.backlog[slot]! += own;
    this.dispatchedWork[slot]! += own;
    d.gpuWorkMark = this.dispatchedWork[slot]!;
    const reply = req.reply ?? null;
    // Where this dispatch was judged on the model (admission's, or kv-aware's pick), its reply was predicted too.
    if (reply !== null && !Number.isNaN(d.gpuTtftMs)) d.predictedReplyTokens = reply.medianTokens;
    d.gpuStream = this.streams.add(slot, reply === null ? req.maxTokens : reply.slackTokens, d.gpuWorkMark, reply);
    this.arriving.dispatched(slot, now, own, uncached);
    this.ownPrefill[slot]! += uncached;
    this.ownPrefillWork[slot]! += own;
    if (uncached > 0) pool.workPerToken += MEAN_PROMPT_ALPHA * (own / uncached - pool.workPerToken);
    const m = pool.meanPromptWork;
    pool.meanPromptWork = Number.isNaN(m) ? own : m + MEAN_PROMPT_ALPHA * (own - m);
  }

  /** Output tokens came back from `slot` (each relayed chunk of a stream): a step of that replica just ended. */
  tokens(slot: number): void {
    this.phase.ended(slot, this.fleet.nowMs());
  }

  /** First token after `ttftMs` from dispatch; `streamed` false (a JSON reply: its whole body) teaches nothing. */
  firstToken(slot: number, req: RouteRequest, d: Decision, ttftMs: number, streamed: boolean): void {
    const pool = this.pools.get(req.poolId);
    if (pool === undefined) return;
    const fig = pool.fig;
    const now = this.fleet.nowMs();
    d.gpuPrefilled = true;
    // Sent before its replica restarted (replicaReset): counting it would take from the requests sent since.
    if (!this.streams.holds(d.gpuStream)) return;
    this.release(slot, req, d, fig.blockSize);
    // Everything dispatched there before this request has been prefilled: at most what came after remains.
    this.advance(slot, now);
    const after = this.dispatchedWork[slot]! - d.gpuWorkMark;
    if (this.backlog[slot]! > after) this.backlog[slot] = after > 0 ? after : 0;
    this.streams.first(d.gpuStream, now, this.doneWork(slot, now));
    if (!streamed) return;
    this.phase.ended(slot, now);
    d.gpuFirstAtMs = now;
    const st = this.st;
    const fresh = this.kv.read(slot, st);
    const lr = this.fleet.ledger.get(slot, LEDGER_RUNNING);
    d.gpuFirstBatch = fresh && st.running > lr ? st.running : lr;
    d.gpuFirstKv = st.usedBlocks * fig.blockSize;
    d.gpuFirstDone = this.doneWork(slot, now);
    d.gpuFirstScraped = fresh ? st.prefillTokensTotal : Number.NaN;
    if (!Number.isNaN(d.gpuTtftMs)) {
      this.metrics?.ttftPrediction(req.poolId, d.gpuTtftMs, ttftMs);
      if (d.gpuWorkAhead >= MIN_RATE_SAMPLE_WORK) {
        this.rates.observe(slot, d.gpuWorkAhead, ttftMs - d.gpuStepsMs, fig.prefillTokensPerMs);
      }
    }
  }

  /**
   * The attempt ended having streamed `outputTokens`. A stream that saw its first token gives a decode-step
   * sample: its time between first and last token, less the prefill the replica did meanwhile (doneWork, the
   * chunks of prefills still under way included), over its gaps, at the mean of the batch and KV seen at both
   * ends; none when that prefill was over MAX_SAMPLE_PREFILL_SHARE of the span.
   */
  ended(slot: number, req: RouteRequest, d: Decision, outputTokens: number): void {
    const pool = this.pools.get(req.poolId);
    if (pool === undefined) return;
    const fig = pool.fig;
    const held = this.streams.remove(d.gpuStream);
    d.gpuStream = -1;
    // Sent before its replica restarted (replicaReset): releasing it would take from the requests sent since.
    if (!held) return;
    if (!d.gpuPrefilled) {
      // Ended before its first token: its prefill is no longer ours.
      this.release(slot, req, d, fig.blockSize);
      this.arriving.unsent(slot, uncachedOf(req, d, fig.blockSize));
      return;
    }
    if (Number.isNaN(d.gpuFirstAtMs)) return;
    if (outputTokens < MIN_DECODE_SAMPLE_TOKENS) return;
    const now = this.fleet.nowMs();
    const rate = this.rates.rate(slot, fig.prefillTokensPerMs);
    const st = this.st;
    const fresh = this.kv.read(slot, st);
    let prefillWork = this.doneWork(slot, now) - d.gpuFirstDone;
    // Other gateways' prefills rode in these steps too, and only the replica counts them: its scraped prefill
    // tokens over (about) the same span, at our work per token. Left out, each of four gateways learned a step
    // inflated by three quarters of the prefill, saw TPOT past its target and shed a quarter of a load that
    // one gateway serves whole (native-bench/sim/README.md, "Several gateways").
    const scraped = fresh ? st.prefillTokensTotal - d.gpuFirstScraped : Number.NaN;
    if (scraped > 0 && scraped * pool.workPerToken > prefillWork) prefillWork = scraped * pool.workPerToken;
    const prefillMs = prefillWork / rate;
    const spanMs = now - d.gpuFirstAtMs;
    if (prefillMs > MAX_SAMPLE_PREFILL_SHARE * spanMs) return;
    const stepMs = (spanMs - prefillMs) / (outputTokens - 1);
    const lr = this.fleet.ledger.get(slot, LEDGER_RUNNING);
    // The ledger has already let this request go (the last scrape may not have): count it once.
    const batchEnd = fresh && st.running > lr + 1 ? st.running : lr + 1;
    this.decode.observe(slot, fig, (d.gpuFirstBatch + batchEnd) / 2, (d.gpuFirstKv + st.usedBlocks * fig.blockSize) / 2, stepMs);
  }

  /** The replica restarted or left: forget what was learned and queued there. */
  replicaReset(slot: number): void {
    this.rates.reset(slot);
    this.decode.reset(slot);
    this.kv.reset(slot);
    this.streams.reset(slot);
    this.backlog[slot] = 0;
    this.arriving.reset(slot);
    this.ownPrefill[slot] = 0;
    this.ownPrefillWork[slot] = 0;
    this.phase.reset(slot);
  }

  /** The request's prefill is no longer awaiting a first token here. */
  private release(slot: number, req: RouteRequest, d: Decision, bs: number): void {
    const p = this.ownPrefill[slot]! - uncachedOf(req, d, bs);
    const w = this.ownPrefillWork[slot]! - d.gpuOwnWork;
    this.ownPrefill[slot] = p > 0 ? p : 0;
    this.ownPrefillWork[slot] = p > 0 && w > 0 ? w : 0;
  }

  private advance(slot: number, now: number): number {
    let b = this.backlog[slot]!;
    const at = this.backlogAt[slot]!;
    if (now > at) {
      b -= (now - at) * this.drainPerMs[slot]!;
      if (b < 0) b = 0;
      this.backlog[slot] = b;
      this.backlogAt[slot] = now;
    }
    return b;
  }

  /**
   * Work prefilled there so far by the fluid's account: dispatched less still queued, so the chunks of a
   * prefill still under way count (a decode sample that missed them learned a step several times its own).
   */
  private doneWork(slot: number, now: number): number {
    return this.dispatchedWork[slot]! - this.advance(slot, now);
  }
}

function uncachedOf(req: RouteRequest, d: Decision, bs: number): number {
  const u = req.promptTokens - d.cachedBlocks * bs;
  return u > 0 ? u : 0;
}
