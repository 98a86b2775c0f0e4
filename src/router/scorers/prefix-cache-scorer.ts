// llm-d's prefix-cache-scorer: the fraction of the prompt's blocks the replica holds (longest consecutive
// match from block 0, per the prefix index), 0 for a prompt with no full block. Range [0, 1].
// Thread: the acceptor. Hot path: O(candidates).
import type { CandidateTable } from '../candidate-table.ts';

export class PrefixCacheScorer {
  readonly name = 'prefix-cache-scorer';

  score(t: CandidateTable, promptBlocks: number, out: Float64Array): void {
    for (let i = 0; i < t.n; i++) out[i] = promptBlocks > 0 ? t.matched[i]! / promptBlocks : 0;
  }
}
