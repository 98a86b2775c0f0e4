// dynamo (NVIDIA Dynamo's KV router with its KvRouterConfig defaults), for comparison:
//   cost = prefill_load_scale × max((active prefill tokens + isl) / block size − credit × overlap blocks, 0)
//        + potential blocks                                                       → argmin, temperature 0
// where, per worker (anchors/dynamo-sequences.ts, Dynamo's ActiveSequences):
//   active prefill tokens = Σ (isl − overlap × block size) of its requests not yet past prefill
//   potential blocks      = unique active prompt blocks + this request's blocks not active there
// prefill_load_scale 1.0, overlap_score_credit 1.0, router_temperature 0 (ties at random, seeded), no output
// blocks tracked (router_track_output_blocks false), real hashes for the active set (router_assume_kv_reuse
// true). The overlap comes from its own index fed by the engines' KV events (use_kv_events true), not from
// dispatches. Upstream: ai-dynamo/dynamo lib/kv-router/src/scheduling/config.rs (defaults),
// lib/kv-router/src/scheduling/selector/default.rs (the logit), lib/llm/src/kv_router/sequence.rs (accounting).
// Thread: the acceptor. Hot path: one index lookup, then O(prompt blocks) map reads per candidate.
import type { GatewayConfig } from '../../config/schema.ts';
import { DynamoSequences, dynamoNewTokens } from '../anchors/dynamo-sequences.ts';
import { MaxScorePicker } from '../pickers/max-score-picker.ts';
import { SeededRandom } from '../seeded-random.ts';
import type { Decision, FleetView, RouteRequest } from '../types.ts';
import { AnchorPolicy } from './anchor-policy.ts';

export const DYNAMO_DEFAULTS = { prefillLoadScale: 1.0, overlapScoreCredit: 1.0 } as const;

/** What Dynamo's router queue (its native admission) reads and is told. */
export interface DynamoLoad {
  activePrefillTokens(slot: number): number;
  /** Called when a worker's prefill load drops (a first token, an end, a reset); null = nobody listens. */
  onLoadDrop: (() => void) | null;
}

export class DynamoPolicy extends AnchorPolicy implements DynamoLoad {
  readonly name = 'dynamo';
  readonly sequences: DynamoSequences;
  onLoadDrop: (() => void) | null = null;
  private readonly picker: MaxScorePicker;
  private readonly blockSizes = new Map<string, number>();

  constructor(slots: number, pools: GatewayConfig['pools'], seed = 1) {
    super(slots, { feed: 'events', capacity: Infinity });
    this.sequences = new DynamoSequences(slots);
    this.picker = new MaxScorePicker(new SeededRandom(seed));
    for (const p of pools) this.blockSizes.set(p.id, p.block_size);
  }

  activePrefillTokens(slot: number): number {
    return this.sequences.activePrefillTokens(slot);
  }

  pick(req: RouteRequest, eligible: readonly number[], fleet: FleetView, out: Decision): number {
    const n = eligible.length;
    if (n === 0) return -1;
    this.matchAll(req, eligible, fleet);
    const t = this.table;
    const bs = this.blockSizes.get(req.poolId) ?? 16;
    const seq = this.sequences;
    for (let i = 0; i < n; i++) {
      const slot = t.slot[i]!;
      const prefillBlocks = (seq.activePrefillTokens(slot) + dynamoNewTokens(req.promptTokens, t.matched[i]!, bs)) / bs;
      const decodeBlocks = seq.activeBlocks(slot) + seq.newBlocks(slot, req.blockHashes);
      t.weight[i] = DYNAMO_DEFAULTS.prefillLoadScale * prefillBlocks + decodeBlocks;
    }
    const chosen = this.picker.pickMin(n, t.weight);
    this.rankKey.set(t.weight.subarray(0, n));
    this.rankedBy(false, chosen);
    out.slot = t.slot[chosen]!;
    out.cachedBlocks = t.matched[chosen]!;
    out.why = t.matched[chosen]! > 0 ? 'prefix' : 'policy';
    return out.slot;
  }

  override describe(slot: number): string {
    return `; active_blocks=${this.sequences.activeBlocks(slot)}; active_prefill_tokens=${this.sequences.activePrefillTokens(slot)}`;
  }

  override dispatched(slot: number, req: RouteRequest, d: Decision): void {
    const bs = this.blockSizes.get(req.poolId) ?? 16;
    // Its own overlap estimate, whatever the gateway judged the pick with (Decision.policyCachedBlocks).
    const own = d.policyCachedBlocks >= 0 ? d.policyCachedBlocks : d.cachedBlocks;
    this.sequences.add(d, slot, req.blockHashes, dynamoNewTokens(req.promptTokens, own, bs));
  }

  firstToken(_slot: number, _req: RouteRequest, d: Decision): void {
    this.sequences.prefillDone(d);
    this.onLoadDrop?.();
  }

  finished(_slot: number, _req: RouteRequest, d: Decision): void {
    this.sequences.free(d);
    this.onLoadDrop?.();
  }

  override replicaReset(slot: number): void {
    super.replicaReset(slot);
    this.sequences.reset(slot);
    this.onLoadDrop?.();
  }
}
