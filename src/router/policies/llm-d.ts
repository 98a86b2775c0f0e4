// llm-d (the llm-d Router's default profile), for comparison:
//   score = 3 × prefix scorer + 2 × queue-scorer + 2 × kv-cache-utilization-scorer → max-score-picker
// (llm-d/llm-d-router pkg/epp/config/loader/defaults.go). Two prefix scorers, each with its own index:
//   - `llm-d`: prefix-cache-scorer over the approximate index (written at dispatch, as its PreRequest hook
//     does; per-pod LRU of the scraped num_gpu_blocks, approximateprefix/);
//   - `llm-d-precise`: precise-prefix-cache-scorer over an index fed by the engines' KV events (the
//     kv-cache indexer), matched blocks / prompt blocks, the default profile's weights otherwise.
// No correction, reply blocks or headroom avoidance. Queue and KV usage are the raw scraped figures (no
// ledger), read every registry scrape (50 ms in the simulator, llm-d's default refresh).
// Thread: the acceptor. Hot path: one index lookup + one row copy per candidate, no allocation.
import { ReplicaRow } from '../../registry/replica-table.ts';
import { MaxScorePicker } from '../pickers/max-score-picker.ts';
import { KvCacheUtilizationScorer } from '../scorers/kv-cache-utilization-scorer.ts';
import { PrefixCacheScorer } from '../scorers/prefix-cache-scorer.ts';
import { QueueScorer } from '../scorers/queue-scorer.ts';
import { SeededRandom } from '../seeded-random.ts';
import type { Decision, FleetView, RouteRequest } from '../types.ts';
import { AnchorPolicy } from './anchor-policy.ts';

export const LLMD_WEIGHTS = { prefix: 3, queue: 2, kv: 2 } as const;
/**
 * Pods the precise index keeps per block key (kvblock.InMemoryIndexConfig.PodCacheSize, defaultPodsPerKey 10:
 * llm-d-kv-cache pkg/kvcache/kvblock/in_memory.go), an LRU per key.
 */
export const LLMD_PODS_PER_KEY = 10;
/** The EPP's metrics refresh interval (--refresh-metrics-interval, llm-d-router pkg/epp/server/options.go): ms. */
export const LLMD_REFRESH_MS = 50;

export class LlmdPolicy extends AnchorPolicy {
  readonly name: 'llm-d' | 'llm-d-precise';
  private readonly row = new ReplicaRow();
  private readonly waiting: Float64Array;
  private readonly kvUsage: Float64Array;
  private readonly part: Float64Array;
  private readonly prefix = new PrefixCacheScorer();
  private readonly queue = new QueueScorer();
  private readonly kv = new KvCacheUtilizationScorer();
  private readonly picker: MaxScorePicker;

  /** precise: the prefix index is fed by KV events (llm-d-precise); else approximate, written at dispatch. */
  constructor(slots: number, precise: boolean, seed = 1) {
    super(slots, precise ? { feed: 'events', capacity: Infinity, holdersPerHash: LLMD_PODS_PER_KEY } : { feed: 'dispatch', capacity: 'scraped' });
    this.name = precise ? 'llm-d-precise' : 'llm-d';
    this.waiting = new Float64Array(slots);
    this.kvUsage = new Float64Array(slots);
    this.part = new Float64Array(slots);
    this.picker = new MaxScorePicker(new SeededRandom(seed));
  }

  pick(req: RouteRequest, eligible: readonly number[], fleet: FleetView, out: Decision): number {
    const n = eligible.length;
    if (n === 0) return -1;
    this.matchAll(req, eligible, fleet);
    const t = this.table;
    const row = this.row;
    for (let i = 0; i < n; i++) {
      const ok = fleet.readRow(t.slot[i]!, row) && row.lastGoodScrapeMs !== 0;
      this.waiting[i] = ok ? row.waiting : 0;
      this.kvUsage[i] = ok ? row.kvUsage : Number.NaN;
    }
    const total = t.weight;
    const part = this.part;
    this.prefix.score(t, req.blockHashes.length, part);
    for (let i = 0; i < n; i++) total[i] = LLMD_WEIGHTS.prefix * part[i]!;
    this.queue.score(n, this.waiting, part);
    for (let i = 0; i < n; i++) total[i]! += LLMD_WEIGHTS.queue * part[i]!;
    this.kv.score(n, this.kvUsage, part);
    for (let i = 0; i < n; i++) total[i]! += LLMD_WEIGHTS.kv * part[i]!;
    const chosen = this.picker.pick(n, total);
    this.rankKey.set(total.subarray(0, n));
    this.rankedBy(true, chosen);
    out.slot = t.slot[chosen]!;
    out.cachedBlocks = t.matched[chosen]!;
    out.why = t.matched[chosen]! > 0 ? 'prefix' : 'policy';
    return out.slot;
  }
}
