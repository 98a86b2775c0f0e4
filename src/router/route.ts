// Routing: filter the pool's members (healthy, not draining, not already tried, hosting the adapter, not held
// as stalled unless nothing else is left), then let the configured policy pick. Adapter filter: replicas where the adapter is resident (scraped) win when any
// is; otherwise every replica configured to host it. Feedback from the pipeline is forwarded to the policy.
// Thread: the acceptor. No I/O, no await.
import type { GatewayConfig } from '../config/schema.ts';
import { Decision, type FleetView, type RouteRequest, type RoutingFeedback, type RoutingPolicy } from './types.ts';
import { RoundRobinPolicy } from './policies/round-robin.ts';
import { LeastOutstandingTokensPolicy } from './policies/least-outstanding-tokens.ts';
import { KvAwarePolicy } from './policies/kv-aware.ts';
import { LlmdPolicy } from './policies/llm-d.ts';
import { SglangPolicy } from './policies/sglang.ts';
import { DynamoPolicy } from './policies/dynamo.ts';
import { PrefixIndex } from './prefix-index.ts';
import type { GpuTimeModel } from '../gpu-time/gpu-time-model.ts';
import type { FitFirst } from './fit-first.ts';
import { isRanked, type RankedPolicy } from './ranking.ts';

export type RouteResult =
  | { ok: true; slot: number; replicaId: string; decision: Decision }
  | { ok: false; reason: 'no_healthy_replica' | 'all_tried' };

/**
 * Builds the configured policy for `fleet` (setup only). kv-aware shares `index` when given (an acceptor
 * thread attaching to another's buffer), else gets a new one of routing.prefix_index_entries. The comparison
 * anchors each keep their own index (anchors/block-holders.ts), one per policy instance.
 */
export function createPolicy(cfg: GatewayConfig, fleet: FleetView, index?: PrefixIndex, gpu?: GpuTimeModel): RoutingPolicy & RoutingFeedback {
  const r = cfg.routing;
  const slots = fleet.ledger.slots;
  const prefixIndex = (): PrefixIndex => index ?? new PrefixIndex({ entries: r.prefix_index_entries, slots });
  switch (r.policy) {
    case 'round-robin': return new RoundRobinPolicy();
    case 'least-outstanding-tokens': return new LeastOutstandingTokensPolicy();
    case 'llm-d': return new LlmdPolicy(slots, false);
    case 'llm-d-precise': return new LlmdPolicy(slots, true);
    case 'sglang': return new SglangPolicy(slots);
    case 'dynamo': return new DynamoPolicy(slots, cfg.pools);
    case 'kv-aware': return new KvAwarePolicy({
      pools: cfg.pools, index: prefixIndex(), fleet, staleMs: cfg.admission.stale_ms,
      headroomRatio: cfg.admission.headroom_ratio, connectionsPerReplica: cfg.upstream.connections_per_replica,
      loadBoundEpsilon: r.load_bound_epsilon, warmLoadBoundEpsilon: r.warm_load_bound_epsilon, coldPrefixBlocks: r.cold_prefix_blocks, coldKeyBlock: r.cold_key_block,
      ttftMargin: cfg.admission.ttft_margin, tpotMargin: cfg.admission.tpot_margin, ...(gpu !== undefined ? { gpu } : {}),
    });
  }
}

/** Replicas to pass over while others can serve (src/pipeline/stall-watch.ts: judged stalled). */
export interface ReplicaHolds {
  held(slot: number): boolean;
}

/** Which prefix index answered a slot's lookup (PrefixIndex: always approximate; EventsPrefixIndex: per slot). */
export interface IndexSource {
  servedBy(slot: number): 'events' | 'approximate';
  /** The events index checks its predictions (EventsPrefixIndex): what it predicted at dispatch… */
  checkDispatched?(req: RouteRequest, d: Decision): void;
  /** …against the cached tokens the replica reported (null: it did not say). */
  checkFinished?(req: RouteRequest, d: Decision, cachedTokens: number | null): void;
}

/** The approximate index alone serves every lookup. */
export const APPROXIMATE_ONLY: IndexSource = { servedBy: () => 'approximate' };

/** Policies that read the prefix index (their route header says which index served). */
export const INDEX_POLICIES: ReadonlySet<string> = new Set(['kv-aware', 'llm-d', 'sglang', 'dynamo']);

export class Router {
  readonly policy: RoutingPolicy & RoutingFeedback;
  private readonly fleet: FleetView;
  private readonly holds: ReplicaHolds | null;
  private readonly index: IndexSource | null;
  /** The GPU-time model admission predicts with: it learns from every policy's feedback. */
  readonly gpu: GpuTimeModel | null;
  /**
   * Expediter's admission on equal terms (fit-first.ts): a ranked policy's pick judged on the fleet's best
   * prefix information and moved down its ranking when it does not fit; null: the policy's pick as is.
   */
  private fitFirst: FitFirst | null = null;
  private ranked: RankedPolicy | null = null;
  /** Reused across calls: route() is synchronous, so one scratch array per router is safe. */
  private readonly eligible: number[] = [];
  private readonly resident: number[] = [];
  private readonly heldOut: number[] = [];

  constructor(
    policy: RoutingPolicy & RoutingFeedback, fleet: FleetView, holds: ReplicaHolds | null = null,
    index: IndexSource | null = null, gpu: GpuTimeModel | null = null,
  ) {
    this.policy = policy;
    this.fleet = fleet;
    this.holds = holds;
    this.index = index;
    this.gpu = gpu;
  }

  /**
   * Judge every pick of a ranked policy with `f` (the simulator's race under Expediter's admission). A policy
   * that judges fit itself (kv-aware, not ranked) is unaffected.
   */
  setFitFirst(f: FitFirst | null): void {
    this.fitFirst = f;
    this.ranked = f !== null && isRanked(this.policy) ? this.policy : null;
  }

  /** Routes one request. The Decision is fresh per call (≈ 80 B): the pipeline keeps it for the feedback hooks. */
  route(req: RouteRequest): RouteResult {
    const fleet = this.fleet;
    const members = fleet.candidates(req.poolId);
    const eligible = this.eligible;
    const resident = this.resident;
    const heldOut = this.heldOut;
    const holds = this.holds;
    eligible.length = 0;
    resident.length = 0;
    heldOut.length = 0;
    let healthy = 0;
    for (let i = 0; i < members.length; i++) {
      const slot = members[i]!;
      if (req.pinned !== undefined && slot !== req.pinned) continue;
      if (req.subset !== undefined && !req.subset.includes(slot)) continue;
      if (!fleet.isHealthy(slot)) continue;
      const r = fleet.replica(slot);
      if (r.draining && req.pinned === undefined) continue;
      if (req.adapter !== null && r.adapters !== null && !r.adapters.includes(req.adapter)) continue;
      healthy++;
      if (req.excluded.includes(slot)) continue;
      if (holds !== null && holds.held(slot)) {
        heldOut.push(slot);
        continue;
      }
      eligible.push(slot);
      if (req.adapter !== null && fleet.residentAdapters(slot).includes(req.adapter)) resident.push(slot);
    }
    if (eligible.length === 0 && heldOut.length === 0) return { ok: false, reason: healthy === 0 ? 'no_healthy_replica' : 'all_tried' };
    // A held replica serves only when no other can: better a likely wait than no answer.
    const pool = resident.length > 0 ? resident : eligible.length > 0 ? eligible : heldOut;
    const d = new Decision();
    d.promptBlocks = req.blockHashes.length;
    const slot = this.policy.pick(req, pool, fleet, d);
    if (slot < 0) return { ok: false, reason: 'no_healthy_replica' };
    d.slot = slot;
    if (this.ranked !== null) this.fitFirst!.apply(this.ranked, req, pool, fleet, d);
    return { ok: true, slot: d.slot, replicaId: fleet.replica(d.slot).id, decision: d };
  }

  dispatched(req: RouteRequest, d: Decision): void {
    d.engineReportsReply = this.index !== null && this.index.servedBy(d.slot) === 'events';
    this.index?.checkDispatched?.(req, d);
    this.gpu?.dispatched(d.slot, req, d);
    this.policy.dispatched?.(d.slot, req, d);
  }

  /** `streamed` false: a JSON reply, seen whole (its "first token" time includes every other token). */
  firstToken(req: RouteRequest, d: Decision, ttftMs: number, streamed = true): void {
    this.gpu?.firstToken(d.slot, req, d, ttftMs, streamed);
    this.policy.firstToken?.(d.slot, req, d, ttftMs);
  }

  /** Output tokens of an attempt came back from its replica (a relayed chunk). Hot path: one store. */
  tokens(d: Decision): void {
    this.gpu?.tokens(d.slot);
  }

  /** tokens() for a caller that holds the attempt's slot (the simulator): no Decision load per token. */
  tokensAt(slot: number): void {
    this.gpu?.tokens(slot);
  }

  /** The attempt's stream ended after `outputTokens` (called at once, before any reply hashing). */
  ended(req: RouteRequest, d: Decision, outputTokens: number): void {
    this.gpu?.ended(d.slot, req, d, outputTokens);
  }

  finished(req: RouteRequest, d: Decision, cachedTokens: number | null, replyHashes: Float64Array | null): void {
    this.index?.checkFinished?.(req, d, cachedTokens);
    this.policy.finished?.(d.slot, req, d, cachedTokens, replyHashes);
  }

  replicaReset(slot: number): void {
    this.gpu?.replicaReset(slot);
    this.policy.replicaReset?.(slot);
  }

  /** The x-gateway-route value for a routed request: built only where expose_route_header asks for it. */
  header(req: RouteRequest, d: Decision): string {
    const policy = this.policy;
    let h = `replica=${this.fleet.replica(d.slot).id}; policy=${policy.name}; cached_blocks=${d.cachedBlocks}; prompt_blocks=${d.promptBlocks}; prompt_tokens=${req.promptTokens}`;
    if (!Number.isNaN(d.predictedTtftMs)) h += `; predicted_ttft_ms=${Math.round(d.predictedTtftMs)}`;
    if (!Number.isNaN(d.kvAfter)) h += `; kv_after=${d.kvAfter.toFixed(2)}`;
    h += `; why=${d.why}`;
    if (this.index !== null) h += `; index=${this.index.servedBy(d.slot)}`;
    return h + policy.describe(d.slot, req, this.fleet);
  }
}
