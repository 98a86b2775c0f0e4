// The quota stage's contract: what the request pipeline asks of a quota store, whichever backend serves it.
// Thread: main. Implemented by the Redis backend (Lua, EVALSHA) and the in-memory backend with one semantics.
import type { TenantConfig } from '../config/schema.ts';

/** The limits of one tenant, as the store needs them (derived from TenantConfig at setup). */
export interface TenantLimits {
  readonly name: string;
  readonly tokensPerSecond: number;
  readonly burstTokens: number;
  readonly maxInflight: number;
}

export function tenantLimits(t: TenantConfig): TenantLimits {
  return Object.freeze({ name: t.name, tokensPerSecond: t.tokens_per_second, burstTokens: t.burst_tokens, maxInflight: t.max_inflight });
}

/** Figures for the x-ratelimit-* headers. */
export interface RateLimitFigures {
  readonly limitTokens: number;
  readonly remainingTokens: number;
  /** Seconds until the bucket is full again. */
  readonly resetSeconds: number;
  readonly limitRequests: number;
  readonly remainingRequests: number;
}

export type QuotaDecision =
  | ({ readonly ok: true; readonly degraded: boolean } & RateLimitFigures)
  | ({
      readonly ok: false;
      readonly code: 'rate_limit_exceeded' | 'concurrency_limit_exceeded' | 'quota_unavailable';
      /** Whole seconds, >= 1, computed from the limiter's state. */
      readonly retryAfterSeconds: number;
    } & RateLimitFigures);

export interface QuotaStore {
  /**
   * Atomically refills the tenant's bucket, takes `costTokens` (prompt + max_tokens) and a concurrency lease
   * named `requestId`, or refuses with the reason and the seconds until it would succeed.
   */
  acquire(tenant: TenantLimits, requestId: string, costTokens: number): Promise<QuotaDecision>;
  /**
   * Settles a request exactly once: refunds `reservedTokens - usedTokens` (never below zero) and releases the
   * lease. Calling it twice for one request id has no further effect.
   */
  settle(tenant: TenantLimits, requestId: string, reservedTokens: number, usedTokens: number): Promise<void>;
  close(): Promise<void>;
  /**
   * acquire() without the promise, for stores that decide in process (memory, the acceptor threads' shared
   * table): the request path then skips an await. Throws where acquire() would reject.
   */
  acquireNow?(tenant: TenantLimits, requestId: string, costTokens: number): QuotaDecision;
  /** settle() without the promise, for the same stores; the result is not read. */
  settleNow?(tenant: TenantLimits, requestId: string, reservedTokens: number, usedTokens: number): unknown;
  /** Counters for metrics and /readyz (added by the quota engineer; optional so other stores need not). */
  stats?(): QuotaStoreStats;
}

export interface QuotaStoreStats {
  readonly backend: 'memory' | 'redis';
  /** Redis answering (always true for memory). */
  readonly redisUp: boolean;
  /** Redis calls that failed or timed out. */
  readonly redisFailures: number;
  /** Requests admitted by the local bucket while Redis was unusable (failure_mode open). */
  readonly degradedAdmissions: number;
  /** Requests refused with quota_unavailable (failure_mode closed). */
  readonly unavailableRefusals: number;
  /** Settles waiting for Redis to come back. */
  readonly pendingSettles: number;
  readonly replayedSettles: number;
  /** Settles dropped because the queue was full (their refunds are lost; leases still expire). */
  readonly droppedSettles: number;
}
