// The prefill arriving at each replica, ρ's numerator: a sum of equivalent work decaying with
// ARRIVAL_WINDOW_MS, fed by our dispatches and by what other gateways send there, which this gateway sees only
// in the scrape: the prompt tokens the replica scheduled for prefill (prefix-cache queries less hits, every
// gateway's; KvState.prefillTokensTotal) beyond the ones this gateway sent. Counting only our own, each of
// four gateways saw a quarter of it and admitted streams past their TPOT.
// Ours are counted when dispatched and the replica's when scheduled, and the scrape is older than our count:
// other gateways' tokens scheduled there are at least its count less all ours dispatched there (a lower bound,
// as some of ours may still wait), and only a rise of that bound above its highest so far counts as theirs.
// With one gateway the bound rises only by prefill we predicted cached and the replica did not find. A request
// of ours that ended before its first token leaves our count (it may never have been scheduled; when it was,
// its tokens read once as another gateway's).
// Thread: the acceptor. Hot path: one comparison per prediction, a few array writes per new scrape.
import type { KvState } from '../router/kv-estimate.ts';
import { ARRIVAL_WINDOW_MS } from './model-parameters.ts';

export class ArrivingPrefill {
  /** Per slot: the decaying sum, and when it was last decayed. */
  private readonly sum: Float64Array;
  private readonly at: Float64Array;
  /** Per slot: the scrape last folded (its time), the replica's count then, and the bound's highest so far (NaN: none). */
  private readonly stamp: Float64Array;
  private readonly total: Float64Array;
  private readonly floor: Float64Array;
  /** Per slot: our uncached prompt tokens dispatched there, cumulative. */
  private readonly own: Float64Array;

  constructor(slots: number) {
    this.sum = new Float64Array(slots);
    this.at = new Float64Array(slots);
    this.stamp = new Float64Array(slots);
    this.total = new Float64Array(slots).fill(Number.NaN);
    this.floor = new Float64Array(slots).fill(Number.NaN);
    this.own = new Float64Array(slots);
  }

  /** The work arriving at `slot` within the window, decayed to `now`. */
  now(slot: number, now: number): number {
    const a = this.sum[slot]!;
    if (a === 0) return 0;
    const dt = now - this.at[slot]!;
    return dt > 0 ? a * Math.exp(-dt / ARRIVAL_WINDOW_MS) : a;
  }

  add(slot: number, now: number, work: number): void {
    this.sum[slot] = this.now(slot, now) + work;
    this.at[slot] = now;
  }

  /** We dispatched `work` (`uncachedTokens` of prompt) to `slot` at `now`. */
  dispatched(slot: number, now: number, work: number, uncachedTokens: number): void {
    this.add(slot, now, work);
    this.own[slot]! += uncachedTokens;
  }

  /** A request of ours ended before its first token there. */
  unsent(slot: number, uncachedTokens: number): void {
    this.own[slot]! -= uncachedTokens;
  }

  /** Other gateways' prefill tokens scheduled on `slot` since the last scrape folded, when `st` (just read) holds a new one; else 0. */
  foreign(slot: number, st: KvState): number {
    if (!st.fresh || st.scrapeMs === this.stamp[slot]) return 0;
    this.stamp[slot] = st.scrapeMs;
    const total = st.prefillTokensTotal;
    const prev = this.total[slot]!;
    this.total[slot] = total;
    const bound = total - this.own[slot]!;
    const floor = this.floor[slot]!;
    // First scrape, counters not reported (NaN), or gone back (a restart the registry has not reported yet).
    if (!(total >= prev) || !(bound > floor)) {
      if (!(total >= prev) || Number.isNaN(floor)) this.floor[slot] = bound;
      return 0;
    }
    this.floor[slot] = bound;
    return bound - floor;
  }

  reset(slot: number): void {
    this.sum[slot] = 0;
    this.stamp[slot] = 0;
    this.total[slot] = Number.NaN;
    this.floor[slot] = Number.NaN;
  }
}
