// Turns the raw figures of an acquire (from the Lua script or the in-memory mirror) into a QuotaDecision,
// so both backends report with one rounding. Thread: main. Hot path: one small object per request.
import type { QuotaDecision, TenantLimits } from './types.ts';

/** Lease duration assumed for the concurrency Retry-After until the first settle has measured one. */
export const DEFAULT_LEASE_DURATION_MS = 1000;
/** Weight of each new lease duration in the exponentially weighted mean (both backends). */
export const LEASE_DURATION_EWMA_WEIGHT = 0.2;

export const REASON_OK = 0;
export const REASON_TOKENS = 1;
export const REASON_CONCURRENCY = 2;

/** Costs are whole, finite, non-negative token counts; anything else is a caller bug. */
export function assertCost(costTokens: number): void {
  if (!Number.isSafeInteger(costTokens) || costTokens < 0) throw new RangeError(`quota cost must be a non-negative integer, got ${costTokens}`);
}

export function toDecision(
  limits: TenantLimits,
  admitted: boolean,
  reason: number,
  remainingTokens: number,
  resetMs: number,
  inflight: number,
  retryMs: number,
  degraded: boolean,
): QuotaDecision {
  const remainingRequests = inflight >= limits.maxInflight ? 0 : limits.maxInflight - inflight;
  const resetSeconds = Math.ceil(resetMs / 1000);
  if (admitted) {
    return {
      ok: true, degraded,
      limitTokens: limits.burstTokens, remainingTokens, resetSeconds,
      limitRequests: limits.maxInflight, remainingRequests,
    };
  }
  return {
    ok: false,
    code: reason === REASON_CONCURRENCY ? 'concurrency_limit_exceeded' : 'rate_limit_exceeded',
    // Whole seconds, rounded up so a client that obeys it is not refused again for want of a few ms.
    retryAfterSeconds: Math.max(1, Math.ceil(retryMs / 1000)),
    limitTokens: limits.burstTokens, remainingTokens, resetSeconds,
    limitRequests: limits.maxInflight, remainingRequests,
  };
}
