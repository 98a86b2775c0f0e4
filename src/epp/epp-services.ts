// What the request pipeline runs with in endpoint-picker mode: the gateway's own Services (tokenizer, prefix
// index, KV events, GPU-time model, admission, router, metrics) with the parts that belong to the gateway in
// front taken out or narrowed:
//   - auth: none here (Envoy's filters authenticate); a tenant is named by `epp.tenant_header` when set;
//   - quota: only for a request whose header names a configured tenant (that tenant's limits apply); every
//     other request is unmetered;
//   - usage records: none (the gateway in front bills); metrics and the log line stay;
//   - one attempt: Envoy, not the picker, connects to the replica and tries the fallbacks;
//   - no stall watch: the picker cannot abort Envoy's upstream request;
//   - the catalog: only the picker's pool (a model another pool serves is a 404 here).
// Thread: main. Built once per config (re)load; per request nothing here allocates.
import type { EppConfig, GatewayConfig } from '../config/schema.ts';
import { ModelCatalog } from '../pipeline/model-catalog.ts';
import type { Services, TenantIdentity } from '../pipeline/services.ts';
import { tenantLimits, type QuotaDecision, type QuotaStore, type TenantLimits } from '../quota/types.ts';
import { UsageRecorder } from '../usage/usage-recorder.ts';

/** The identity of a request no configured tenant is named for: standard tier, every model, no quota. */
const UNMETERED_LIMITS: TenantLimits = Object.freeze({ name: 'unmetered', tokensPerSecond: Infinity, burstTokens: Infinity, maxInflight: Infinity });
export const UNMETERED: TenantIdentity = Object.freeze({ name: 'unmetered', limits: UNMETERED_LIMITS, slaTier: 'standard', allowedModels: [] });

const GRANTED: Promise<QuotaDecision> = Promise.resolve(Object.freeze({
  ok: true, degraded: false, limitTokens: 0, remainingTokens: 0, resetSeconds: 0, limitRequests: 0, remainingRequests: 0,
}) as QuotaDecision);
const SETTLED: Promise<void> = Promise.resolve();

/** The gateway's quota store for named tenants; an unmetered request neither takes nor settles anything. */
class EppQuota implements QuotaStore {
  private readonly inner: QuotaStore;
  constructor(inner: QuotaStore) {
    this.inner = inner;
  }
  acquire(t: TenantLimits, requestId: string, cost: number): Promise<QuotaDecision> {
    return t === UNMETERED_LIMITS ? GRANTED : this.inner.acquire(t, requestId, cost);
  }
  settle(t: TenantLimits, requestId: string, reserved: number, used: number): Promise<void> {
    return t === UNMETERED_LIMITS ? SETTLED : this.inner.settle(t, requestId, reserved, used);
  }
  /** The gateway closes its store; this view holds nothing of its own. */
  close(): Promise<void> {
    return SETTLED;
  }
}

export function isUnmetered(t: TenantIdentity | null): boolean {
  return t === null || t.limits === UNMETERED_LIMITS;
}

const NO_USAGE = new UsageRecorder([]);

export interface EppBase {
  readonly services: Services;
  readonly tenants: ReadonlyMap<string, TenantIdentity>;
  readonly epp: EppConfig;
}

/** The EPP's Services for the gateway's current ones (call again after each reload). */
export function eppBase(gateway: Services, epp: EppConfig): EppBase {
  const cfg: GatewayConfig = gateway.cfg;
  const pool = cfg.pools.find((p) => p.id === epp.pool)!;
  const tenants = new Map<string, TenantIdentity>();
  for (const t of cfg.tenants) {
    tenants.set(t.name, Object.freeze({ name: t.name, limits: tenantLimits(t), slaTier: t.sla_tier, allowedModels: t.allowed_models }));
  }
  const services: Services = Object.freeze({
    ...gateway,
    cfg: { ...cfg, upstream: { ...cfg.upstream, max_attempts: 1 } },
    catalog: new ModelCatalog({ ...cfg, pools: [pool] }),
    quota: new EppQuota(gateway.quota),
    stalls: null,
    usage: NO_USAGE,
  });
  return { services, tenants, epp };
}
