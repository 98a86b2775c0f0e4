// One candidate replica's prediction for one request (TTFT, its parts, TPOT, and whether the model sees
// everything there), written by GpuTimeModel.predict() into an object the caller owns and reuses, so that a
// prediction allocates nothing; and the wait until such a prediction would fit. Thread: the acceptor (and the
// simulator's).
import { ARRIVAL_WINDOW_MS } from './model-parameters.ts';

/** One candidate's prediction, written by predict() into a caller-owned object. */
export class GpuPrediction {
  fresh = false;
  /** Sequences decoding now (scrape or ledger, the larger). */
  batch = 0;
  /** KV: blocks in use now (KvEstimator), the pool size (NaN unknown), and use after this request (0-1). */
  usedBlocks = 0;
  totalBlocks = Number.NaN;
  kvAfter = Number.NaN;
  /** Equivalent prefill tokens ahead of this request's first token, its own included; and its own. */
  workAhead = 0;
  ownWork = 0;
  /** Prefill rate used, tokens per ms. */
  rate = 0;
  /** TTFT parts: prefill work / rate, and the decode steps the prefill rides in. */
  prefillMs = 0;
  stepsMs = 0;
  /** What is left of the step in progress when the request arrives (0 on an idle replica). */
  residualMs = 0;
  adapterMs = 0;
  ttftMs = 0;
  /** TTFT with nothing queued ahead: its own prefill, its steps and the adapter load. */
  ownTtftMs = 0;
  /** Decode step once this request and those prefilling there join the batch, and ρ with this request. */
  stepMs = 0;
  rho = 0;
  /** ρ's parts before the cap: the prefill arriving there, and this request's own (capped at OWN_RHO_CAP). */
  rhoArriving = 0;
  rhoOwn = 0;
  tpotMs = 0;
  /**
   * Streams there this request's prefill would push past their TPOT target (stream-slack.ts). Read through
   * GpuTimeModel.harmOf() where predict() may have left it pending (`harmPending`, with harmClearMs, idleMs).
   */
  harm = 0;
  harmPending = false;
  /** When the last of those streams would end, ms from now (StreamSlack.clearMs); 0 when it harms none. */
  harmClearMs = 0;
  /**
   * When this gateway's requests there would all have ended with no new work sent (StreamSlack.idleMs), ms
   * from now; `idleKnown` when that is when the replica goes idle: its row is fresh and shows nothing but ours.
   */
  idleMs = 0;
  idleKnown = false;
  inflight = 0;
  /**
   * Nothing there the gateway cannot see: no sequence decoding (so no decode step in progress of unseen
   * length) and all the prefill ahead is what this model dispatched itself (no other thread's, no other
   * gateway's waiting requests). The TTFT is then exact but for the prefill rate and `fillMs`.
   */
  seenWhole = false;
  /**
   * Its TTFT at worst when seenWhole: every prefill of ours there not yet answered by a first token counted
   * whole (none of it done, whatever the fluid says: the engine may not have started on what we sent), then
   * its own, in steps of the token budget, its last step filled by later arrivals' chunks, plus adapter load.
   */
  worstTtftMs = 0;
}

/**
 * How long until `p` would fit a TTFT limit of `budgetMs` and a TPOT of `tpotMs` on its replica, with no new
 * work sent there meanwhile: the queue ahead drains in real time, and ρ decays with the window. Infinity when
 * it never would by either (its own prefill alone is over the budget, or its TPOT is the batch's step, not
 * prefill that decays): the caller then waits for streams to end (GpuPrediction.idleMs).
 */
export function waitUntilFits(p: GpuPrediction, budgetMs: number, tpotMs: number): number {
  let wait = 0;
  if (p.ttftMs > budgetMs) {
    if (p.ownTtftMs > budgetMs) return Number.POSITIVE_INFINITY;
    wait = p.ttftMs - budgetMs;
  }
  if (p.tpotMs > tpotMs) {
    // ρ(t) = ρ₀·e^(−t/τ) + own: the ρ that would meet the target is 1 − step / target. With no arriving
    // prefill left to decay, or a step alone past the limit, only streams ending would help: not this wait's.
    const need = 1 - p.stepMs / tpotMs - p.rhoOwn;
    if (!(need > 0) || !(p.rhoArriving > need)) return Number.POSITIVE_INFINITY;
    const t = ARRIVAL_WINDOW_MS * Math.log(p.rhoArriving / need);
    if (t > wait) wait = t;
  }
  return wait;
}
