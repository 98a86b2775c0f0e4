// llm-d's kv-cache-utilization-scorer: 1 − the scraped KV cache usage (absolute, not normalised), clamped
// to [0, 1]; an unknown usage scores as an empty cache, as a missing metric reads as zero there.
// Thread: the acceptor. Hot path: O(candidates).

export class KvCacheUtilizationScorer {
  readonly name = 'kv-cache-utilization-scorer';

  score(n: number, kvUsage: Float64Array, out: Float64Array): void {
    for (let i = 0; i < n; i++) {
      const u = kvUsage[i]!;
      out[i] = Number.isNaN(u) || u <= 0 ? 1 : u >= 1 ? 0 : 1 - u;
    }
  }
}
