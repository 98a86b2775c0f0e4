// kv-aware's picker: candidates ranked in tiers, then by a key within the best tier that has any.
//   tier 0: within the load bound, fresh row, fits (admission's rule, KV headroom, connection cap)
//   tier 1: past the load bound, fresh row, fits            → only when no candidate within the bound fits
//   tier 2: within the load bound, fresh row, does not fit   → the least bad of a full pool
//   tier 3: within the load bound, stale row (load unknown, so never preferred to a known one)
// The load bound (kv-aware: tight for cold prompts, looser for warm ones; policies/kv-aware.ts) ranks; it never
// turns a request some replica can serve in time into a queued or shed one. When every candidate within the bound
// misses, the fitting one past it is taken: measured with the tight bound on every prompt (a popular prefix's
// holder past it on tokens but the one replica whose cached blocks make the TTFT), with the bound as a hard
// filter, kv-aware on the Mooncake trace (tuning seeds 1-3, kv-aware under Expediter's admission, 2 simulated
// minutes at 18.8-31.1 requests/s, race settings) shed 38-437 requests a run where this sheds 38-407, and met the
// SLO for 0.1-1.7 points fewer requests at 11 of the 12 rates (0.4 more at one); on Azure's code trace and the
// seed mix the two agree within 0.6 points. Candidates past the bound that do not fit are never picked (the
// filter always leaves at least one in).
// Key: the lowest predicted TTFT, or (cold prefixes) the highest rendezvous weight; in the full tier the most
// cached blocks, then the lowest predicted TTFT (before() says why).
// Thread: the acceptor. Hot path: one pass over the candidates.
import type { CandidateTable } from '../candidate-table.ts';

export const TIER_FITS = 0;
/** Fits, but past the load bound: taken only when no candidate within the bound fits. */
export const TIER_FITS_PAST_BOUND = 1;
export const TIER_FULL = 2;
export const TIER_STALE = 3;
const TIER_NONE = 4;

export function tierOf(t: CandidateTable, i: number): number {
  if (t.allowed[i] === 0) return t.fresh[i] === 1 && t.fits[i] === 1 ? TIER_FITS_PAST_BOUND : TIER_NONE;
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
      if (tier < bestTier || (tier === bestTier && tier !== TIER_NONE && this.before(t, tier, i, best))) {
        best = i;
        bestTier = tier;
      }
    }
    this.tier = bestTier;
    return best;
  }

  /**
   * Whether candidate i goes before `best` of the same tier: the lower predicted TTFT; in the full tier (no
   * candidate within the bound fits) the one holding more of the prompt's blocks first, then the lower TTFT.
   * There every choice misses its targets, so the pick that adds the least prefill to the fleet is the one
   * that harms the streams already running least: least-TTFT spread a shared prefix over replicas that had to
   * prefill it again, and the prefill chunks stretched everyone's decode steps past the TPOT target. Under
   * Expediter's admission a pick that does not fit is queued, not sent, so this order decides where
   * requests go only when nothing gates them (`admission: none` in the simulator's race, routing alone).
   * Tuned on the simulator's tuning seeds 1-3, kv-aware under `none`, race settings, 2 simulated minutes: on
   * the seed mix at 2.0, 2.2 and 2.4× its computed capacity the share within SLO rose at all nine points
   * (+0.3 to +10.1 points; the hit rate 0.71-0.73 → 0.72-0.75), on Mooncake at speeds 5 and 6 at five of six
   * (+4.7 to +12.1; −1.2 at seed 2, speed 5); under Expediter's admission the same points moved by at most 0.2.
   * Azure's code trace shares no prefix, so nothing there changed.
   */
  private before(t: CandidateTable, tier: number, i: number, best: number): boolean {
    if (tier === TIER_FULL && t.matched[i] !== t.matched[best]) return t.matched[i]! > t.matched[best]!;
    return t.ttftMs[i]! < t.ttftMs[best]!;
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
