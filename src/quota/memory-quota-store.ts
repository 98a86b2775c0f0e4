// In-process QuotaStore with the Redis backend's semantics, line for line (scripts/token-bucket.lua and
// scripts/settle.lua): the demo's default when no Redis is configured, and the fail-open local bucket.
// Thread: main. Hot path: acquire and settle are synchronous Map work wrapped in a resolved promise; the
// lease prune walks the tenant's leases (at most max_inflight entries, ~1 us at 256). Live leases are
// renewed every lease_ttl/3 like the Redis store's (renewLive).
// Clock: injectable (tests); the default is a monotonic wall clock (timeOrigin + performance.now()), the
// in-process analogue of Redis TIME: one clock for every caller of this store.
import { performance } from 'node:perf_hooks';
import {
  assertCost, DEFAULT_LEASE_DURATION_MS, LEASE_DURATION_EWMA_WEIGHT, REASON_CONCURRENCY, REASON_OK, REASON_TOKENS, toDecision,
} from './decision.ts';
import type { QuotaDecision, QuotaStore, QuotaStoreStats, TenantLimits } from './types.ts';

export interface MemoryQuotaStoreOptions {
  /** Lease lifetime without a settle (quota.lease_ttl_ms). */
  leaseTtlMs: number;
  /** Milliseconds since the epoch; injected by tests. */
  clock?: () => number;
  /** Renew this store's live leases every leaseTtlMs / 3 (at most every 250 ms) (default true). */
  renewLeases?: boolean;
  /** Marks admissions as degraded (set when this store stands in for an unreachable Redis). */
  degraded?: boolean;
}

interface TenantState {
  tokens: number;
  tsMs: number;
  /** Mean lease duration in ms, NaN until the first settle. */
  durationMs: number;
  /** Request id -> lease expiry in ms. */
  readonly leases: Map<string, number>;
}

const MEMORY_STATS: QuotaStoreStats = Object.freeze({
  backend: 'memory', redisUp: true, redisFailures: 0, degradedAdmissions: 0, unavailableRefusals: 0,
  pendingSettles: 0, replayedSettles: 0, droppedSettles: 0,
});

const monotonicNow = (): number => performance.timeOrigin + performance.now();

export class MemoryQuotaStore implements QuotaStore {
  private readonly tenants = new Map<string, TenantState>();
  private readonly leaseTtlMs: number;
  private readonly clock: () => number;
  private readonly degraded: boolean;
  private readonly renewTimer: NodeJS.Timeout | null;

  constructor(opts: MemoryQuotaStoreOptions) {
    this.leaseTtlMs = opts.leaseTtlMs;
    this.clock = opts.clock ?? monotonicNow;
    this.degraded = opts.degraded ?? false;
    if (opts.renewLeases === false) {
      this.renewTimer = null;
    } else {
      // Every lease here belongs to this process, so all live ones are renewed (as the Redis store renews
      // its own): only a request the pipeline forgets to settle loses its lease, one TTL after the last renew.
      this.renewTimer = setInterval(() => this.renewLive(), Math.max(250, Math.floor(this.leaseTtlMs / 3)));
      this.renewTimer.unref();
    }
  }

  /** Extends every live lease to now + TTL (mirrors scripts/renew.lua); returns how many. */
  renewLive(): number {
    const now = this.clock();
    let renewed = 0;
    for (const st of this.tenants.values()) {
      for (const [id, expiry] of st.leases) {
        if (expiry > now) {
          st.leases.set(id, now + this.leaseTtlMs); // same key: keeps its place in the Map's order
          renewed++;
        } else {
          st.leases.delete(id); // see acquireNow: keeps the Map ordered by expiry
        }
      }
    }
    return renewed;
  }

  acquire(tenant: TenantLimits, requestId: string, costTokens: number): Promise<QuotaDecision> {
    return Promise.resolve(this.acquireNow(tenant, requestId, costTokens));
  }

  /** The synchronous core of acquire (mirrors token-bucket.lua). */
  acquireNow(tenant: TenantLimits, requestId: string, costTokens: number): QuotaDecision {
    assertCost(costTokens);
    const now = this.clock();
    const rate = tenant.tokensPerSecond;
    const burst = tenant.burstTokens;
    const st = this.state(tenant, now);
    // Refill into locals: like the script, a refusal writes nothing back to the bucket.
    let tokens = st.tokens;
    let tsMs = st.tsMs;
    if (now > tsMs) {
      tokens = tokens + (now - tsMs) * rate / 1000;
      tsMs = now;
    }
    if (tokens > burst) tokens = burst;
    const leases = st.leases;
    // Expired leases are dropped from the front only. The Map's insertion order is also expiry order: an
    // acquire appends now + TTL, and renewLive gives every live lease the same new expiry and deletes the
    // expired ones. So the sweep stops at the first live lease and an admission costs O(expired), not
    // O(leases held): a tenant with thousands of streams in flight paid a scan of all of them per request.
    // (A clock that steps back can put an earlier expiry behind a later one; that lease then counts until
    // the ones before it expire or the next renewLive, the conservative side.)
    for (const [id, expiry] of leases) {
      if (expiry > now) break;
      leases.delete(id);
    }
    const inflight = leases.size;
    // One id, one request in flight (see token-bucket.lua).
    const dupExpiry = leases.get(requestId);

    let resetMs = Math.ceil((burst - tokens) * 1000 / rate);
    let tokenWaitMs = 0;
    if (costTokens > burst) tokenWaitMs = Math.max(resetMs, 1);
    else if (tokens < costTokens) tokenWaitMs = Math.ceil((costTokens - tokens) * 1000 / rate);

    const atCap = dupExpiry !== undefined || inflight >= tenant.maxInflight;
    let leaseWaitMs = 0;
    if (atCap) {
      const expiry = dupExpiry ?? [...leases.values()].sort((a, b) => a - b)[inflight - tenant.maxInflight]!;
      const mean = Number.isNaN(st.durationMs) ? DEFAULT_LEASE_DURATION_MS : st.durationMs;
      leaseWaitMs = Math.ceil(Math.min(expiry - now, Math.max(0, expiry - this.leaseTtlMs + mean - now)));
    }

    const remaining = Math.floor(tokens);
    if (tokenWaitMs > 0) {
      return toDecision(tenant, false, REASON_TOKENS, remaining, resetMs, inflight, Math.max(tokenWaitMs, leaseWaitMs), false);
    }
    if (atCap) return toDecision(tenant, false, REASON_CONCURRENCY, remaining, resetMs, inflight, leaseWaitMs, false);

    st.tokens = tokens - costTokens;
    st.tsMs = tsMs;
    resetMs = Math.ceil((burst - st.tokens) * 1000 / rate);
    leases.set(requestId, now + this.leaseTtlMs);
    return toDecision(tenant, true, REASON_OK, Math.floor(st.tokens), resetMs, inflight + 1, 0, this.degraded);
  }

  settle(tenant: TenantLimits, requestId: string, reservedTokens: number, usedTokens: number): Promise<void> {
    this.settleNow(tenant, requestId, reservedTokens, usedTokens);
    return Promise.resolve();
  }

  /** The synchronous core of settle (mirrors settle.lua). True when this call settled the request. */
  settleNow(tenant: TenantLimits, requestId: string, reservedTokens: number, usedTokens: number): boolean {
    const st = this.tenants.get(tenant.name);
    if (st === undefined) return false;
    const expiry = st.leases.get(requestId);
    if (expiry === undefined) return false;
    st.leases.delete(requestId);
    const now = this.clock();
    if (expiry <= now) return false;
    if (now > st.tsMs) {
      st.tokens = st.tokens + (now - st.tsMs) * tenant.tokensPerSecond / 1000;
      st.tsMs = now;
    }
    st.tokens = Math.min(tenant.burstTokens, st.tokens + Math.max(0, reservedTokens - usedTokens));
    const d = Math.max(0, now - (expiry - this.leaseTtlMs));
    st.durationMs = Number.isNaN(st.durationMs) ? d : st.durationMs + (d - st.durationMs) * LEASE_DURATION_EWMA_WEIGHT;
    return true;
  }

  stats(): QuotaStoreStats {
    return MEMORY_STATS;
  }

  close(): Promise<void> {
    if (this.renewTimer !== null) clearInterval(this.renewTimer);
    this.tenants.clear();
    return Promise.resolve();
  }

  private state(tenant: TenantLimits, now: number): TenantState {
    let st = this.tenants.get(tenant.name);
    if (st === undefined) {
      st = { tokens: tenant.burstTokens, tsMs: now, durationMs: Number.NaN, leases: new Map() };
      this.tenants.set(tenant.name, st);
    }
    return st;
  }
}
