// The failure policy with Redis unreachable (a loopback port nobody listens on): no waiting, the local share
// in open mode, quota_unavailable in closed mode, settles queued with a bound and never thrown to the caller.
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { test } from 'node:test';
import { createRedisClient } from '../../../src/quota/redis-client.ts';
import { RedisQuotaStore } from '../../../src/quota/redis-quota-store.ts';
import { ResilientQuotaStore, type ResilientQuotaStoreOptions } from '../../../src/quota/resilient-quota-store.ts';
import type { TenantLimits } from '../../../src/quota/types.ts';

async function deadPort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const addr = srv.address();
  await new Promise((r) => srv.close(r));
  return typeof addr === 'object' && addr !== null ? addr.port : 0;
}

// Redis timeouts far beyond the tests' own timeout: a store that waited on Redis would fail by timing out.
const REDIS_TIMEOUT_MS = 120_000;
const TEST_TIMEOUT = { timeout: 30_000 };

async function unreachableStore(t: { after: (fn: () => Promise<void>) => void }, opts: Partial<ResilientQuotaStoreOptions>): Promise<ResilientQuotaStore> {
  const client = createRedisClient(`redis://127.0.0.1:${await deadPort()}`, { connectTimeoutMs: REDIS_TIMEOUT_MS, commandTimeoutMs: REDIS_TIMEOUT_MS });
  const store = new ResilientQuotaStore(new RedisQuotaStore(client, { keyPrefix: 'never', leaseTtlMs: 60_000 }), {
    failureMode: 'open', leaseTtlMs: 60_000, ...opts,
  });
  t.after(() => store.close());
  return store;
}

const acme: TenantLimits = Object.freeze({ name: 'acme', tokensPerSecond: 90, burstTokens: 900, maxInflight: 7 });

void test('fail-open admits from a local share of 1/expectedGateways of the limits, marked degraded', TEST_TIMEOUT, async (t) => {
  const store = await unreachableStore(t, { failureMode: 'open', expectedGateways: 3 });
  const d = await store.acquire(acme, 'r1', 100); // no wait on a disconnected Redis
  assert.deepEqual(d, { ok: true, degraded: true, limitTokens: 300, remainingTokens: 200, resetSeconds: 4, limitRequests: 2, remainingRequests: 1 });
  assert.equal((await store.acquire(acme, 'r2', 100)).ok, true);
  const full = await store.acquire(acme, 'r3', 1);
  assert.equal(!full.ok && full.code, 'concurrency_limit_exceeded');
  await store.settle(acme, 'r1', 100, 100); // goes to the local store: frees its slot
  assert.equal((await store.acquire(acme, 'r3', 1)).ok, true);
  assert.equal(store.stats().pendingSettles, 0, 'nothing was sent to Redis, so nothing to compensate');
  assert.equal(store.stats().redisUp, false);
  assert.equal(store.stats().degradedAdmissions, 3);
});

void test('fail-closed refuses with quota_unavailable and a retry-after of at least 1 s', TEST_TIMEOUT, async (t) => {
  const store = await unreachableStore(t, { failureMode: 'closed' });
  const d = await store.acquire(acme, 'r1', 100);
  assert.deepEqual(d, {
    ok: false, code: 'quota_unavailable', retryAfterSeconds: 1,
    limitTokens: 900, remainingTokens: 0, resetSeconds: 0, limitRequests: 7, remainingRequests: 0,
  });
  assert.equal(store.stats().unavailableRefusals, 1);
});

void test('settles that cannot reach Redis are queued up to the bound, oldest dropped and counted', TEST_TIMEOUT, async (t) => {
  const store = await unreachableStore(t, { failureMode: 'closed', maxPendingSettles: 3 });
  for (let i = 0; i < 5; i++) await store.settle(acme, `r${i}`, 100, 10); // never throws
  const s = store.stats();
  assert.equal(s.pendingSettles, 3);
  assert.equal(s.droppedSettles, 2);
  await store.settle(acme, 'r4', 100, 10);
  assert.equal(store.stats().pendingSettles, 3, 'a repeated settle replaces its queued entry');
  assert.equal(store.stats().droppedSettles, 2);
});

void test('a cost that is not a whole non-negative number is a bug, not a Redis failure', async (t) => {
  const store = await unreachableStore(t, { failureMode: 'open' });
  await assert.rejects(store.acquire(acme, 'r1', -1), RangeError);
  await assert.rejects(store.acquire(acme, 'r1', Number.NaN), RangeError);
  await assert.rejects(store.acquire(acme, 'r1', 1.5), RangeError);
  assert.equal(store.stats().degradedAdmissions, 0);
});
