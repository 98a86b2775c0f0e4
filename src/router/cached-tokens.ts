// The cached_tokens a replica reports for a prompt whose first blocks the router believes it holds: what the
// usage record's predicted_cached_tokens shows and what a replica's report is compared with (correction).
// Thread: any. Hot path: arithmetic only.

/**
 * What the replica should report as cached_tokens for a prompt whose first `cachedBlocks` blocks it holds:
 * vLLM always computes the last prompt token, so a full hit reports one block less on a block boundary.
 */
export function predictedCachedTokens(cachedBlocks: number, promptTokens: number, blockSize: number): number {
  const hit = cachedBlocks * blockSize;
  const cap = Math.floor((promptTokens - 1) / blockSize) * blockSize;
  return hit < cap ? hit : cap > 0 ? cap : 0;
}
