// Binds the metric families to one config: bounded label sets (pools, replicas, tenants, codes) and every
// label child the hot path needs, in arrays indexed by label slot. Rebuilt on config reload and swapped in
// with one field assignment; prom-client keeps old series, so counters never reset on reload.
// Thread: main. Built at setup; read per request (array index + at most two Map.get, no allocation); the
// children are fast-children.ts's, which skip prom-client's per-call label hashing.
import type { GatewayConfig } from '../config/schema.ts';
import { ERROR_CODES } from '../errors/codes.ts';
import type { Families } from './families.ts';
import { counterChild, histogramChild, type Incrementer, type Observer } from './fast-children.ts';
import { BoundedLabel, CappedLabel, OTHER_LABEL } from './labels.ts';

export type { Incrementer, Observer } from './fast-children.ts';

export const ROUTES = ['chat', 'completions', 'responses'] as const;
export const TIERS = ['premium', 'standard', 'batch'] as const;
export const ADMISSION_RESULTS = ['admitted', 'queued', 'shed'] as const;
export const QUOTA_RESULTS = ['ok', 'rate_limit_exceeded', 'concurrency_limit_exceeded', 'quota_unavailable', 'degraded'] as const;
export const UPSTREAM_ERROR_KINDS = ['connect', 'reset', 'status_5xx', 'status_4xx', 'first_token_timeout', 'stalled', 'mid_stream'] as const;
export const CANCEL_PHASES = ['queued', 'upstream_wait', 'streaming'] as const;
/** A retry is labelled by the failure kind that caused it, or by the error code it would have returned. */
const RETRY_KINDS = new Set<string>([...UPSTREAM_ERROR_KINDS, ...Object.keys(ERROR_CODES)]);
/** The design's TTFT SLA covers prompts up to this many tokens; longer prompts are labelled prompt="long". */
export const SLA_PROMPT_TOKENS = 4000;
/** Routing policy names are free strings from plugins; more than this many distinct ones is a bug. */
const MAX_POLICY_LABELS = 16;
/** Lazily cached (status, code) and retry-kind children per slot; beyond this, children are not cached. */
const MAX_CACHED_PER_SLOT = 64;

/** Children for one (route, pool) pair. */
interface RouteSlot {
  readonly requests: Map<number, Map<string, Incrementer>>;
  /** [tier slot * 2 + (long prompt ? 1 : 0)]. */
  readonly ttftByTier: Observer[];
  readonly duration: Observer;
  readonly cancellations: Incrementer;
}

/** Children for one pool. */
interface PoolSlot {
  readonly label: string;
  readonly tpot: Observer;
  readonly queueWait: Observer;
  /** [tenant slot] → input, output, cached token counters. */
  readonly tokens: { input: Incrementer; output: Incrementer; cached: Incrementer }[];
  readonly admission: Record<(typeof ADMISSION_RESULTS)[number], Incrementer>;
  readonly retries: Map<string, Incrementer>;
}

export class Binding {
  readonly pools: BoundedLabel;
  readonly replicas: BoundedLabel;
  readonly tenants: BoundedLabel;
  /** Wire codes, plus the two outcomes that never reach the wire as a code: a replica's own 4xx code passed
   *  through, and a client that hung up (status 499, nginx's convention). */
  private readonly codes = new BoundedLabel([...Object.keys(ERROR_CODES), 'upstream_bad_request', 'client_closed_request']);
  private readonly policies = new CappedLabel(MAX_POLICY_LABELS);
  /** tenant name → index into TIERS; unknown tenants get TIERS.length ("none"). */
  private readonly tierOfTenant = new Map<string, number>();
  private readonly routeSlots: RouteSlot[] = [];
  readonly poolSlots: PoolSlot[] = [];
  private readonly routed = new Map<string, Incrementer[]>();
  private readonly f: Families;

  constructor(cfg: GatewayConfig, f: Families) {
    this.f = f;
    this.pools = new BoundedLabel(cfg.pools.map((p) => p.id));
    this.replicas = new BoundedLabel(cfg.pools.flatMap((p) => p.replicas.map((r) => r.id)));
    this.tenants = new BoundedLabel(cfg.metrics.tenant_labels);
    for (const t of cfg.tenants) this.tierOfTenant.set(t.name, TIERS.indexOf(t.sla_tier));
    const tierLabels = [...TIERS, 'none'];
    for (const route of ROUTES) {
      for (const pool of this.pools.values) {
        this.routeSlots.push({
          requests: new Map(),
          ttftByTier: tierLabels.flatMap((tier) => [histogramChild(f.ttft, route, pool, tier, 'short'), histogramChild(f.ttft, route, pool, tier, 'long')]),
          duration: histogramChild(f.duration, route, pool),
          cancellations: counterChild(f.cancellations, route, pool),
        });
      }
    }
    for (const pool of this.pools.values) {
      this.poolSlots.push({
        label: pool,
        tpot: histogramChild(f.tpot, pool),
        queueWait: histogramChild(f.queueWait, pool),
        tokens: this.tenants.values.map((tenant) => ({
          input: counterChild(f.tokens, pool, tenant, 'input'),
          output: counterChild(f.tokens, pool, tenant, 'output'),
          cached: counterChild(f.tokens, pool, tenant, 'cached'),
        })),
        admission: {
          admitted: counterChild(f.admission, pool, 'admitted'), queued: counterChild(f.admission, pool, 'queued'), shed: counterChild(f.admission, pool, 'shed'),
        },
        retries: new Map(),
      });
    }
    // Zero series for the outcomes dashboards divide by, so ratios and rate() work before the first event
    // (prom-client only materialises a child on its first inc). Histograms stay lazy: ~20 series each.
    for (let r = 0; r < ROUTES.length; r++) {
      for (const pool of cfg.pools) this.requestChild(r, this.pools.index(pool.id), 200, null).inc(0);
    }
    for (const pool of cfg.pools) for (const r of ADMISSION_RESULTS) this.poolSlots[this.pools.index(pool.id)]!.admission[r].inc(0);
    for (const r of cfg.pools.flatMap((p) => p.replicas)) this.routedChild(cfg.routing.policy, r.id);
  }

  routeSlot(routeIndex: number, poolIndex: number): RouteSlot {
    return this.routeSlots[routeIndex * this.pools.values.length + poolIndex]!;
  }

  /** The TTFT child for this tenant's tier and this prompt size. */
  ttft(slot: RouteSlot, tenant: string | null, inputTokens: number): Observer {
    const tier = (tenant === null ? undefined : this.tierOfTenant.get(tenant)) ?? TIERS.length;
    return slot.ttftByTier[tier * 2 + (inputTokens > SLA_PROMPT_TOKENS ? 1 : 0)]!;
  }

  requestChild(routeIndex: number, poolIndex: number, status: number, code: string | null): Incrementer {
    const byStatus = this.routeSlot(routeIndex, poolIndex).requests;
    let byCode = byStatus.get(status);
    if (byCode === undefined) {
      byCode = new Map();
      if (byStatus.size < MAX_CACHED_PER_SLOT) byStatus.set(status, byCode);
    }
    let child = byCode.get(code ?? '');
    if (child === undefined) {
      const statusLabel = Number.isInteger(status) && status >= 100 && status <= 599 ? String(status) : '0';
      child = counterChild(this.f.requests, ROUTES[routeIndex]!, this.pools.values[poolIndex]!, statusLabel, this.codes.label(code));
      if (byCode.size < MAX_CACHED_PER_SLOT) byCode.set(code ?? '', child);
    }
    return child;
  }

  routedChild(policy: string, replica: string): Incrementer {
    let byReplica = this.routed.get(policy);
    if (byReplica === undefined) {
      byReplica = [];
      if (this.routed.size < MAX_POLICY_LABELS * 2) this.routed.set(policy, byReplica);
    }
    const i = this.replicas.index(replica);
    let child = byReplica[i];
    if (child === undefined) {
      child = counterChild(this.f.routing, this.policies.label(policy), this.replicas.values[i]!);
      byReplica[i] = child;
    }
    return child;
  }

  retryChild(pool: string, kind: string): Incrementer {
    const slot = this.poolSlots[this.pools.index(pool)]!;
    let child = slot.retries.get(kind);
    if (child === undefined) {
      const label = RETRY_KINDS.has(kind) ? kind : OTHER_LABEL;
      child = counterChild(this.f.retries, slot.label, label);
      if (slot.retries.size < MAX_CACHED_PER_SLOT) slot.retries.set(kind, child); // odd kinds must not grow the map
    }
    return child;
  }
}
