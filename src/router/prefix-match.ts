// The prefix-index lookup every index-using policy starts with: each candidate's longest consecutive match
// from block 0 into t.matched, zero for a replica whose block size differs from its pool's (its cache keys
// differ, so its overlap must not be used). Returns the longest match.
// Thread: the acceptor. Hot path: one PrefixIndex.lookup.
import type { CandidateTable } from './candidate-table.ts';
import type { FleetView, RouteRequest } from './types.ts';

/** An index that answers the longest held run from block 0 per candidate (PrefixIndex, BlockHolders). */
export interface PrefixLookup {
  lookup(hashes: Float64Array, candidates: readonly number[], out: Int32Array): number;
}

export function matchPrefix(index: PrefixLookup, req: RouteRequest, eligible: readonly number[], fleet: FleetView, t: CandidateTable): number {
  const n = eligible.length;
  if (req.blockHashes.length === 0) {
    for (let i = 0; i < n; i++) t.matched[i] = 0;
    return 0;
  }
  index.lookup(req.blockHashes, eligible, t.matched);
  let max = 0;
  for (let i = 0; i < n; i++) {
    if (t.matched[i]! > 0 && fleet.prefixAffinityOff(t.slot[i]!)) t.matched[i] = 0;
    if (t.matched[i]! > max) max = t.matched[i]!;
  }
  return max;
}
