// Invariant checks over the mock engine's state: every block's reference count equals the number of requests
// holding it, the free count matches, waiting requests hold nothing, running ones hold blocks for their computed
// tokens, each live request is queued exactly once, running ≤ max_num_seqs, distinct running adapters ≤ max_loras.
// Thread: main of the mock process. Not on the hot path: O(blocks + requests) per call, for tests and simulators.
import type { BlockPool } from './block-pool.ts';
import type { EngineRequest } from './engine-request.ts';
import type { EngineConfig } from './types.ts';

export function auditEngine(
  config: EngineConfig, running: readonly EngineRequest[], waiting: readonly EngineRequest[], liveCount: number, pool: BlockPool,
): string[] {
  const problems: string[] = [];
  const { numGpuBlocks, blockSize, maxNumSeqs, maxLoras } = config;
  const refs = new Int32Array(numGpuBlocks);
  const seen = new Set<string>();
  const adapters = new Set<string>();
  for (const r of running) {
    if (r.phase !== 'running') problems.push(`${r.id} is in the running list as ${r.phase}`);
    if (r.adapter !== null) adapters.add(r.adapter);
    const minBlocks = Math.ceil(r.numComputedTokens / blockSize);
    const maxBlocks = Math.ceil(r.numTokens / blockSize);
    if (r.numBlocks < minBlocks || r.numBlocks > maxBlocks) {
      problems.push(`${r.id} holds ${r.numBlocks} blocks for ${r.numComputedTokens}/${r.numTokens} tokens`);
    }
    for (let i = 0; i < r.numBlocks; i++) refs[r.blockIds[i]!]!++;
    seen.add(r.id);
  }
  for (const r of waiting) {
    if (r.phase !== 'waiting' && r.phase !== 'preempted') problems.push(`${r.id} is in the waiting list as ${r.phase}`);
    if (r.numBlocks > 0 || r.numComputedTokens > 0) problems.push(`waiting ${r.id} holds blocks`);
    if (seen.has(r.id)) problems.push(`${r.id} is both running and waiting`);
    seen.add(r.id);
  }
  if (seen.size !== liveCount) problems.push(`${liveCount} live requests, ${seen.size} queued or running`);
  if (running.length > maxNumSeqs) problems.push(`${running.length} running > max_num_seqs ${maxNumSeqs}`);
  if (adapters.size > maxLoras) problems.push(`${adapters.size} adapters running > max_loras ${maxLoras}`);
  let free = 0;
  for (let id = 1; id < numGpuBlocks; id++) {
    if (refs[id] !== pool.refs(id)) problems.push(`block ${id}: ${pool.refs(id)} refs, ${refs[id]} holders`);
    if (refs[id] === 0) free++;
  }
  if (free !== pool.freeBlocks) problems.push(`${pool.freeBlocks} free blocks counted, ${free} unreferenced`);
  return problems;
}
