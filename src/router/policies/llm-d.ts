// llm-d (the llm-d Router's default profile, approximate prefix mode), for comparison:
//   score = 3 × prefix-cache-scorer + 2 × queue-scorer + 2 × kv-cache-utilization-scorer → max-score-picker
// Prefix from the shared PrefixIndex, written at dispatch (as its PreRequest hook does); no correction, no
// reply blocks, no headroom avoidance. Queue and KV usage are the raw scraped figures (no ledger).
// Thread: the acceptor. Hot path: one index lookup + one row copy per candidate, no allocation.
import { ReplicaRow } from '../../registry/replica-table.ts';
import { MaxScorePicker } from '../pickers/max-score-picker.ts';
import type { PrefixIndex } from '../prefix-index.ts';
import { KvCacheUtilizationScorer } from '../scorers/kv-cache-utilization-scorer.ts';
import { PrefixCacheScorer } from '../scorers/prefix-cache-scorer.ts';
import { QueueScorer } from '../scorers/queue-scorer.ts';
import { SeededRandom } from '../seeded-random.ts';
import type { Decision, FleetView, RouteRequest } from '../types.ts';
import { AnchorPolicy } from './anchor-policy.ts';

export const LLMD_WEIGHTS = { prefix: 3, queue: 2, kv: 2 } as const;

export class LlmdPolicy extends AnchorPolicy {
  readonly name = 'llm-d';
  private readonly row = new ReplicaRow();
  private readonly waiting: Float64Array;
  private readonly kvUsage: Float64Array;
  private readonly part: Float64Array;
  private readonly prefix = new PrefixCacheScorer();
  private readonly queue = new QueueScorer();
  private readonly kv = new KvCacheUtilizationScorer();
  private readonly picker: MaxScorePicker;

  constructor(index: PrefixIndex, slots: number, seed = 1) {
    super(index, slots);
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
    out.slot = t.slot[chosen]!;
    out.cachedBlocks = t.matched[chosen]!;
    out.why = t.matched[chosen]! > 0 ? 'prefix' : 'policy';
    return out.slot;
  }
}
