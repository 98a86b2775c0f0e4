// dynamo (NVIDIA Dynamo's KV router cost, temperature 0), for comparison:
//   cost = prefill_load_scale × max(active prefill blocks + prompt blocks − overlap blocks, 0)
//        + (active decode blocks + prompt blocks)                                → argmin (random tie-break)
// with prefill_load_scale 1.0; active prefill blocks = the ledger's not-yet-prefilled tokens / block size,
// active decode blocks = the ledger's reserved KV blocks, overlap = the PrefixIndex match (written at
// dispatch; no correction, reply blocks or headroom). Thread: the acceptor. Hot path: O(candidates).
import { LEDGER_PREFILL_TOKENS, LEDGER_RESERVED_BLOCKS } from '../../registry/inflight-ledger.ts';
import type { GatewayConfig } from '../../config/schema.ts';
import { MaxScorePicker } from '../pickers/max-score-picker.ts';
import { SeededRandom } from '../seeded-random.ts';
import type { Decision, FleetView, RouteRequest } from '../types.ts';
import { AnchorPolicy } from './anchor-policy.ts';

export const DYNAMO_PREFILL_LOAD_SCALE = 1.0;

export class DynamoPolicy extends AnchorPolicy {
  readonly name = 'dynamo';
  private readonly picker: MaxScorePicker;
  private readonly blockSizes = new Map<string, number>();

  constructor(slots: number, pools: GatewayConfig['pools'], seed = 1) {
    super(slots, { feed: 'dispatch', capacity: 'scraped' });
    this.picker = new MaxScorePicker(new SeededRandom(seed));
    for (const p of pools) this.blockSizes.set(p.id, p.block_size);
  }

  pick(req: RouteRequest, eligible: readonly number[], fleet: FleetView, out: Decision): number {
    const n = eligible.length;
    if (n === 0) return -1;
    this.matchAll(req, eligible, fleet);
    const t = this.table;
    const bs = this.blockSizes.get(req.poolId) ?? 16;
    const promptBlocks = Math.ceil(req.promptTokens / bs);
    const ledger = fleet.ledger;
    for (let i = 0; i < n; i++) {
      const slot = t.slot[i]!;
      const prefill = Math.ceil(ledger.get(slot, LEDGER_PREFILL_TOKENS) / bs) + promptBlocks - t.matched[i]!;
      t.weight[i] = DYNAMO_PREFILL_LOAD_SCALE * (prefill > 0 ? prefill : 0) + ledger.get(slot, LEDGER_RESERVED_BLOCKS) + promptBlocks;
    }
    const chosen = this.picker.pickMin(n, t.weight);
    out.slot = t.slot[chosen]!;
    out.cachedBlocks = t.matched[chosen]!;
    out.why = t.matched[chosen]! > 0 ? 'prefix' : 'policy';
    return out.slot;
  }

  override describe(slot: number, _req: RouteRequest, fleet: FleetView): string {
    return `; reserved_blocks=${fleet.ledger.get(slot, LEDGER_RESERVED_BLOCKS)}`;
  }
}
