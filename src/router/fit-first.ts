// Expediter's admission on equal terms (the fleet simulator's race): a routed system's pick is judged with
// the fleet's best prefix information, whatever index the policy itself reads, and a pick that does not fit is
// replaced by that policy's next-ranked candidate that fits, as kv-aware's own fit filter does for kv-aware.
// Without it admission judged an anchor's pick on the anchor's own cached-block estimate (0 for round robin)
// and held back a pick that did not fit instead of moving it.
// The decision then carries the best information's cached blocks (what the GPU-time model and admission
// read) and the policy's own estimate in policyCachedBlocks (what the policy's feedback reads).
// Thread: the acceptor. Hot path: one prefix lookup and one judgement per decision; the ranking only when
// the pick does not fit.
import type { PrefixLookup } from './prefix-match.ts';
import type { RankedPolicy } from './ranking.ts';
import type { Decision, FleetView, RouteRequest } from './types.ts';

/** Whether a replica can take a request now (admission's rules: TTFT and TPOT there, per-stream slack, KV room). */
export interface FitJudge {
  fits(req: RouteRequest, slot: number, cachedBlocks: number): boolean;
}

export class FitFirst {
  private readonly prefix: PrefixLookup | null;
  private readonly judge: FitJudge;
  /** Best prefix information per slot for the current decision. */
  private readonly bestBySlot: Int32Array;
  private readonly lookupOut: Int32Array;
  private readonly slots: Int32Array;
  private readonly matched: Int32Array;
  /** Picks that did not fit and went to a later-ranked candidate, and those where none fitted. */
  moved = 0;
  noneFit = 0;

  /** `prefix`: the fleet's best index (the KV-events index where engines publish events); null: the policy's own figures. */
  constructor(slots: number, prefix: PrefixLookup | null, judge: FitJudge) {
    this.prefix = prefix;
    this.judge = judge;
    this.bestBySlot = new Int32Array(slots);
    this.lookupOut = new Int32Array(slots);
    this.slots = new Int32Array(slots);
    this.matched = new Int32Array(slots);
  }

  /** After `policy` picked into `d` among `eligible`: judge the pick, move it down the ranking if it does not fit. */
  apply(policy: RankedPolicy, req: RouteRequest, eligible: readonly number[], fleet: FleetView, d: Decision): void {
    const best = this.bestBySlot;
    const own = d.cachedBlocks;
    if (this.prefix !== null && req.blockHashes.length > 0) {
      const out = this.lookupOut;
      this.prefix.lookup(req.blockHashes, eligible, out);
      for (let i = 0; i < eligible.length; i++) {
        const slot = eligible[i]!;
        best[slot] = fleet.prefixAffinityOff(slot) ? 0 : out[i]!;
      }
    } else {
      for (let i = 0; i < eligible.length; i++) best[eligible[i]!] = 0;
      best[d.slot] = own;
    }
    d.policyCachedBlocks = own;
    d.cachedBlocks = best[d.slot]!;
    if (this.judge.fits(req, d.slot, d.cachedBlocks)) return;
    const n = policy.ranking(this.slots, this.matched);
    for (let k = 0; k < n; k++) {
      const slot = this.slots[k]!;
      if (slot === d.slot) continue;
      const cached = this.prefix !== null ? best[slot]! : this.matched[k]!;
      if (!this.judge.fits(req, slot, cached)) continue;
      d.slot = slot;
      d.cachedBlocks = cached;
      d.policyCachedBlocks = this.matched[k]!;
      d.why = 'headroom';
      this.moved++;
      return;
    }
    // None fits: the policy's own choice, marked so that admission queues or sheds it.
    d.fits = false;
    this.noneFit++;
  }
}
