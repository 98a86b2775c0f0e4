// Wraps the Redis store with the configured failure policy (quota.failure_mode). Thread: main. Hot path:
// when Redis is healthy it adds one readiness check and a counter reset per call.
// - Bounded waits: the client rejects at once while disconnected (no offline queue) and after
//   quota.timeout_ms when connected but silent (commandTimeout). After `breakerFailures` consecutive
//   failures Redis is skipped for `breakerCooldownMs`, so a hung Redis costs one timeout per cooldown, not
//   one per request. (A NOSCRIPT retry after SCRIPT FLUSH is a second command: 2 x timeout at worst.)
// - open: admits through a local MemoryQuotaStore holding 1/expectedGateways of each tenant's rate, burst and
//   concurrency (every gateway does the same, so the fleet stays near the contracted limits), degraded: true.
// - closed: refuses with quota_unavailable and a Retry-After from the breaker or the reconnect backoff.
// - Settles that fail are queued (at most maxPendingSettles, oldest dropped and counted) and replayed when
//   Redis is ready again; settle.lua is idempotent per request id, so a replay never refunds twice. An
//   acquire whose outcome is unknown (timeout after sending) gets a compensating settle, so a reservation
//   Redis did take is refunded and its lease released instead of leaking until lease_ttl_ms.
import { performance } from 'node:perf_hooks';
import { MemoryQuotaStore } from './memory-quota-store.ts';
import { isRedisReady } from './redis-client.ts';
import type { RedisQuotaStore } from './redis-quota-store.ts';
import { assertCost } from './decision.ts';
import type { QuotaDecision, QuotaStore, QuotaStoreStats, TenantLimits } from './types.ts';

export interface ResilientQuotaStoreOptions {
  failureMode: 'open' | 'closed';
  leaseTtlMs: number;
  /** Gateways expected to share a tenant during an outage; each admits 1/N of its limits locally. */
  expectedGateways?: number;
  /** Queued settles kept for replay (default 10,000); the oldest is dropped beyond it. */
  maxPendingSettles?: number;
  /** Consecutive Redis failures that open the breaker (default 3). */
  breakerFailures?: number;
  /** How long an open breaker skips Redis (default 1,000 ms). */
  breakerCooldownMs?: number;
  /** Replay interval for queued settles while Redis is away (default 1,000 ms). */
  replayIntervalMs?: number;
  /** Called when Redis is found down (first failure) or back (first success after). */
  onStateChange?: (up: boolean, detail: string) => void;
}

interface PendingSettle {
  readonly tenant: TenantLimits;
  readonly reservedTokens: number;
  readonly usedTokens: number;
}

/** Bound on requests remembered as admitted locally (a pipeline that never settles must not grow this). */
const MAX_DEGRADED_REMEMBERED = 65536;

export class ResilientQuotaStore implements QuotaStore {
  private readonly primary: RedisQuotaStore;
  private readonly local: MemoryQuotaStore | null;
  private readonly gateways: number;
  private readonly maxPending: number;
  private readonly breakerFailures: number;
  private readonly breakerCooldownMs: number;
  private readonly onStateChange: (up: boolean, detail: string) => void;
  private readonly localLimits = new WeakMap<TenantLimits, TenantLimits>();
  /** Request id -> whether Redis may have taken its reservation too (acquire sent, outcome unknown). */
  private readonly degraded = new Map<string, boolean>();
  private readonly pending = new Map<string, PendingSettle>();
  private readonly replayTimer: NodeJS.Timeout;
  private consecutiveFailures = 0;
  private breakerOpenUntilMs = 0;
  private up: boolean;
  private replaying = false;
  private closed = false;
  private readonly counters = { redisFailures: 0, degradedAdmissions: 0, unavailableRefusals: 0, replayedSettles: 0, droppedSettles: 0 };

  constructor(primary: RedisQuotaStore, opts: ResilientQuotaStoreOptions) {
    this.primary = primary;
    this.gateways = Math.max(1, opts.expectedGateways ?? 1);
    this.local = opts.failureMode === 'open' ? new MemoryQuotaStore({ leaseTtlMs: opts.leaseTtlMs, degraded: true }) : null;
    this.maxPending = opts.maxPendingSettles ?? 10000;
    this.breakerFailures = opts.breakerFailures ?? 3;
    this.breakerCooldownMs = opts.breakerCooldownMs ?? 1000;
    this.onStateChange = opts.onStateChange ?? (() => undefined);
    this.up = isRedisReady(primary.client);
    primary.client.on('ready', this.onReady);
    primary.client.on('close', this.onClose);
    this.replayTimer = setInterval(this.replaySoon, opts.replayIntervalMs ?? 1000);
    this.replayTimer.unref();
  }

  async acquire(tenant: TenantLimits, requestId: string, costTokens: number): Promise<QuotaDecision> {
    assertCost(costTokens); // a bug, not a Redis failure: must not trip the breaker
    let sent = false;
    if (this.redisUsable()) {
      sent = true;
      try {
        const decision = await this.primary.acquire(tenant, requestId, costTokens);
        this.succeeded();
        return decision;
      } catch (err) {
        this.failed(err);
      }
    }
    return this.fallback(tenant, requestId, costTokens, sent);
  }

  async settle(tenant: TenantLimits, requestId: string, reservedTokens: number, usedTokens: number): Promise<void> {
    const maybeInRedis = this.degraded.get(requestId);
    if (maybeInRedis !== undefined) {
      this.degraded.delete(requestId);
      this.local!.settleNow(this.localShare(tenant), requestId, reservedTokens, usedTokens);
      if (!maybeInRedis) return;
    }
    await this.settleRemote(tenant, requestId, reservedTokens, usedTokens);
  }

  stats(): QuotaStoreStats {
    return { backend: 'redis', redisUp: this.up, pendingSettles: this.pending.size, ...this.counters };
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.replayTimer);
    this.primary.client.off('ready', this.onReady);
    this.primary.client.off('close', this.onClose);
    if (this.pending.size > 0 && isRedisReady(this.primary.client)) await this.replay();
    await this.primary.close();
    await this.local?.close();
  }

  private fallback(tenant: TenantLimits, requestId: string, costTokens: number, sent: boolean): QuotaDecision {
    if (this.local !== null) {
      const decision = this.local.acquireNow(this.localShare(tenant), requestId, costTokens);
      if (decision.ok) {
        this.counters.degradedAdmissions++;
        if (this.degraded.size >= MAX_DEGRADED_REMEMBERED) this.degraded.delete(this.degraded.keys().next().value!);
        this.degraded.set(requestId, sent);
        return decision;
      }
      if (sent) this.enqueue(tenant, requestId, costTokens, 0);
      return decision;
    }
    if (sent) this.enqueue(tenant, requestId, costTokens, 0);
    this.counters.unavailableRefusals++;
    const waitMs = this.breakerOpenUntilMs - performance.now();
    return {
      ok: false,
      code: 'quota_unavailable',
      // The breaker's remaining cooldown, else the reconnect backoff cap (1 s): when Redis may answer again.
      retryAfterSeconds: Math.max(1, Math.ceil(waitMs / 1000)),
      limitTokens: tenant.burstTokens, remainingTokens: 0, resetSeconds: 0,
      limitRequests: tenant.maxInflight, remainingRequests: 0,
    };
  }

  private async settleRemote(tenant: TenantLimits, requestId: string, reservedTokens: number, usedTokens: number): Promise<void> {
    if (this.redisUsable()) {
      try {
        await this.primary.settle(tenant, requestId, reservedTokens, usedTokens);
        this.succeeded();
        return;
      } catch (err) {
        this.failed(err);
      }
    }
    this.enqueue(tenant, requestId, reservedTokens, usedTokens);
  }

  private enqueue(tenant: TenantLimits, requestId: string, reservedTokens: number, usedTokens: number): void {
    if (this.pending.size >= this.maxPending && !this.pending.has(requestId)) {
      // Dropped: the lease still expires after lease_ttl_ms; only the refund is lost. Counted in stats.
      this.pending.delete(this.pending.keys().next().value!);
      this.counters.droppedSettles++;
    }
    this.pending.set(requestId, { tenant, reservedTokens, usedTokens });
  }

  private readonly onClose = (): void => {
    if (this.up && !this.closed) {
      this.up = false;
      this.onStateChange(false, 'connection closed');
    }
  };

  /** 'ready': connected and past ioredis's ready check. A silent Redis is only declared back by a success. */
  private readonly onReady = (): void => {
    if (!this.up && !this.closed && performance.now() >= this.breakerOpenUntilMs) {
      this.up = true;
      this.onStateChange(true, 'reconnected');
    }
    this.replaySoon();
  };

  private readonly replaySoon = (): void => {
    if (this.pending.size > 0 && !this.replaying && !this.closed && this.redisUsable()) void this.replay();
  };

  /** Replays queued settles in order, 16 at a time; stops at the first failure and waits for the next tick. */
  private async replay(): Promise<void> {
    this.replaying = true;
    try {
      while (this.pending.size > 0) {
        const batch = [...this.pending.entries()].slice(0, 16);
        const results = await Promise.allSettled(batch.map(([id, p]) => this.primary.settle(p.tenant, id, p.reservedTokens, p.usedTokens)));
        let failedOne = false;
        for (let i = 0; i < batch.length; i++) {
          const r = results[i]!;
          if (r.status === 'fulfilled') {
            this.pending.delete(batch[i]![0]);
            this.counters.replayedSettles++;
          } else {
            failedOne = true;
            this.failed(r.reason);
          }
        }
        if (failedOne) return;
        this.succeeded();
      }
    } finally {
      this.replaying = false;
    }
  }

  private redisUsable(): boolean {
    return isRedisReady(this.primary.client) && performance.now() >= this.breakerOpenUntilMs;
  }

  private succeeded(): void {
    this.consecutiveFailures = 0;
    if (!this.up) {
      this.up = true;
      this.onStateChange(true, 'redis answered');
    }
    if (this.pending.size > 0 && !this.replaying) void this.replay();
  }

  private failed(err: unknown): void {
    this.counters.redisFailures++;
    this.consecutiveFailures++;
    if (this.consecutiveFailures >= this.breakerFailures) this.breakerOpenUntilMs = performance.now() + this.breakerCooldownMs;
    if (this.up) {
      this.up = false;
      this.onStateChange(false, err instanceof Error ? err.message : String(err));
    }
  }

  private localShare(tenant: TenantLimits): TenantLimits {
    let share = this.localLimits.get(tenant);
    if (share === undefined) {
      const n = this.gateways;
      share = Object.freeze({
        name: tenant.name,
        tokensPerSecond: tenant.tokensPerSecond / n,
        burstTokens: Math.max(1, Math.floor(tenant.burstTokens / n)),
        maxInflight: Math.max(1, Math.floor(tenant.maxInflight / n)),
      });
      this.localLimits.set(tenant, share);
    }
    return share;
  }
}
