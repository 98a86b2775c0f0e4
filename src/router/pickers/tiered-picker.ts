// kv-aware's picker: candidates ranked in tiers, then by a key within the best tier that has any.
//   tier 0: within the load bound, fresh row, fits (KV headroom, TPOT target, connection cap)
//   tier 1: within the load bound, fresh row, does not fit   → the least bad of a full pool
//   tier 2: within the load bound, stale row (load unknown, so never preferred to a known one)
// Candidates outside the load bound are never picked (the filter always leaves at least one in).
// Key: the lowest predicted TTFT, or (cold prefixes) the highest rendezvous weight.
// Thread: the acceptor. Hot path: one pass over the candidates.
import type { CandidateTable } from '../candidate-table.ts';

export const TIER_FITS = 0;
export const TIER_FULL = 1;
export const TIER_STALE = 2;
const TIER_NONE = 3;

export function tierOf(t: CandidateTable, i: number): number {
  if (t.allowed[i] === 0) return TIER_NONE;
  if (t.fresh[i] === 0) return TIER_STALE;
  return t.fits[i] === 1 ? TIER_FITS : TIER_FULL;
}

export class TieredPicker {
  readonly name = 'tiered-picker';
  /** The tier of the last pick. */
  tier = TIER_NONE;

  /** Lowest predicted TTFT in the best tier; -1 when no candidate is allowed. */
  pickLeastTtft(t: CandidateTable): number {
    let best = -1;
    let bestTier = TIER_NONE;
    for (let i = 0; i < t.n; i++) {
      const tier = tierOf(t, i);
      if (tier < bestTier || (tier === bestTier && tier !== TIER_NONE && t.ttftMs[i]! < t.ttftMs[best]!)) {
        best = i;
        bestTier = tier;
      }
    }
    this.tier = bestTier;
    return best;
  }

  /** Highest t.weight among tier-0 candidates; when there is none, the least-TTFT pick of the lower tiers. */
  pickHighestWeight(t: CandidateTable): number {
    let best = -1;
    for (let i = 0; i < t.n; i++) {
      if (tierOf(t, i) === TIER_FITS && (best < 0 || t.weight[i]! > t.weight[best]!)) best = i;
    }
    if (best >= 0) {
      this.tier = TIER_FITS;
      return best;
    }
    return this.pickLeastTtft(t);
  }
}
