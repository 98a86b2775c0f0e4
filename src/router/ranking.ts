// A policy's ranking of one decision's candidates, best first: what "the next-ranked candidate" means when
// the replica a policy picked cannot take the request (fit-first.ts). Each ranked policy keeps its decision's
// figures in its CandidateTable; these helpers order positions by them. Called only when the pick does not
// fit, so the sort's closure and O(n log n) are off the common path.
// Thread: the acceptor. Allocation: one closure per ranking.
import type { CandidateTable } from './candidate-table.ts';

/** A policy that can say, after pick(), how it ranked that decision's candidates. */
export interface RankedPolicy {
  /**
   * The last pick()'s candidates, best first (its choice first): slots into `slots`, the blocks the policy
   * itself believed each holds into `matched`; returns how many. Valid only until the next pick().
   */
  ranking(slots: Int32Array, matched: Int32Array): number;
}

export function isRanked(p: object): p is RankedPolicy {
  return typeof (p as Partial<RankedPolicy>).ranking === 'function';
}

/**
 * The table's first `t.n` candidates ordered by `key` (ascending, or descending when `descending`), ties in
 * table order, the position `chosen` first whatever its key (the policy broke a tie its own way).
 */
export function rankTable(t: CandidateTable, key: Float64Array, descending: boolean, chosen: number, slots: Int32Array, matched: Int32Array, order: Int32Array): number {
  const n = t.n;
  for (let i = 0; i < n; i++) order[i] = i;
  const sign = descending ? -1 : 1;
  const pos = order.subarray(0, n);
  pos.sort((a, b) => (a === chosen ? -1 : b === chosen ? 1 : sign * (key[a]! - key[b]!) || a - b));
  for (let k = 0; k < n; k++) {
    slots[k] = t.slot[pos[k]!]!;
    matched[k] = t.matched[pos[k]!]!;
  }
  return n;
}
