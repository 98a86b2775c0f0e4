// Redis stopped, paused and restarted mid-test under both failure policies, on a private redis-server:
// decisions stay bounded by quota.timeout_ms, follow the configured policy, and recover by themselves.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';
import { createQuotaStore } from '../../../src/quota/create-quota-store.ts';
import { createRedisClient, type RedisClient } from '../../../src/quota/redis-client.ts';
import { ResilientQuotaStore } from '../../../src/quota/resilient-quota-store.ts';
import type { QuotaDecision, TenantLimits } from '../../../src/quota/types.ts';
import { OwnRedis, sleep } from './own-redis.ts';

const TIMEOUT_MS = 300;
/** Scheduling slack on a shared 2-core machine; a hang would be seconds (connect retries, offline queue). */
const SLACK_MS = 700;

let redis: OwnRedis;
before(async () => {
  redis = await OwnRedis.start();
});
after(() => redis.stop());

const limits: TenantLimits = Object.freeze({ name: 'acme', tokensPerSecond: 1, burstTokens: 1000, maxInflight: 4 });

async function makeStore(failureMode: 'open' | 'closed', readyTimeoutMs = 3000): Promise<{ store: ResilientQuotaStore; prefix: string }> {
  const prefix = `test:${randomUUID()}`;
  const store = await createQuotaStore(
    { backend: 'redis', redis_url: redis.url, failure_mode: failureMode, timeout_ms: TIMEOUT_MS, lease_ttl_ms: 60_000, expected_gateways: 1, key_prefix: prefix },
    { expectedGateways: 2, readyTimeoutMs },
  );
  assert.ok(store instanceof ResilientQuotaStore);
  return { store, prefix };
}

async function timed(p: Promise<QuotaDecision>): Promise<{ d: QuotaDecision; ms: number }> {
  const t0 = performance.now();
  const d = await p;
  return { d, ms: performance.now() - t0 };
}

async function inspect(): Promise<RedisClient> {
  const c = createRedisClient(redis.url, { connectTimeoutMs: 1000, commandTimeoutMs: 1000 });
  await new Promise((r) => c.once('ready', r));
  return c;
}

async function untilRedisServes(store: ResilientQuotaStore, maxMs = 8000): Promise<number> {
  const t0 = performance.now();
  for (let i = 0; ; i++) {
    const d = await store.acquire(limits, `probe-${i}`, 0);
    if (d.ok && !d.degraded) {
      await store.settle(limits, `probe-${i}`, 0, 0);
      return performance.now() - t0;
    }
    if (d.ok) await store.settle(limits, `probe-${i}`, 0, 0);
    assert.ok(performance.now() - t0 < maxMs, 'the store did not recover after Redis came back');
    await sleep(50);
  }
}

void test('fail-open: Redis killed mid-test admits through a local share marked degraded, then recovers', async (t) => {
  const { store } = await makeStore('open');
  t.after(() => store.close());
  await untilRedisServes(store); // a loaded box can miss one timeout: start from a store Redis answers
  const first = await store.acquire(limits, 'r1', 100);
  assert.equal(first.ok && first.degraded, false);
  assert.equal(first.limitTokens, 1000);

  await redis.kill();
  const { d, ms } = await timed(store.acquire(limits, 'r2', 100));
  assert.ok(ms < TIMEOUT_MS + SLACK_MS, `decision took ${ms} ms`);
  assert.equal(d.ok, true);
  assert.equal(d.ok && d.degraded, true);
  // 1/expectedGateways of the tenant's limits: 500 tokens, 2 requests in flight
  assert.equal(d.limitTokens, 500);
  assert.equal(d.limitRequests, 2);
  assert.equal(d.remainingTokens, 400);
  const over = await store.acquire(limits, 'r3', 450);
  assert.equal(over.ok, false);
  assert.equal(!over.ok && over.code, 'rate_limit_exceeded');
  await store.settle(limits, 'r2', 100, 100);
  assert.equal(store.stats().redisUp, false);
  assert.ok(store.stats().degradedAdmissions >= 1);

  await redis.restart();
  const recoveredMs = await untilRedisServes(store);
  t.diagnostic(`recovered ${recoveredMs.toFixed(0)} ms after redis-server restarted`);
  assert.equal(store.stats().redisUp, true);
  const back = await store.acquire(limits, 'r4', 100);
  assert.equal(back.ok && !back.degraded && back.limitTokens, 1000, 'the shared bucket is back (r1 persisted)');
  assert.ok(back.remainingTokens >= 800 && back.remainingTokens < 820, `remaining ${back.remainingTokens}`);
});

void test('fail-closed: Redis killed mid-test refuses with quota_unavailable and a retry-after, then recovers', async (t) => {
  const { store } = await makeStore('closed');
  t.after(() => store.close());
  await untilRedisServes(store);
  assert.equal((await store.acquire(limits, 'r1', 100)).ok, true);
  await redis.kill();
  for (let i = 0; i < 5; i++) {
    const { d, ms } = await timed(store.acquire(limits, `r-${i}`, 100));
    assert.ok(ms < TIMEOUT_MS + SLACK_MS, `decision took ${ms} ms`);
    assert.equal(d.ok, false);
    assert.equal(!d.ok && d.code, 'quota_unavailable');
    assert.ok(!d.ok && d.retryAfterSeconds >= 1 && d.retryAfterSeconds <= 2, JSON.stringify(d));
  }
  await redis.restart();
  await untilRedisServes(store);
  assert.equal((await store.acquire(limits, 'r9', 100)).ok, true);
});

void test('a paused Redis costs one timeout per call until the breaker opens, and a late acquire is compensated', async (t) => {
  const { store, prefix } = await makeStore('closed');
  t.after(() => store.close());
  await untilRedisServes(store);
  redis.pause();
  let resumed = false;
  t.after(() => {
    if (!resumed) redis.resume();
  });
  const times: number[] = [];
  for (let i = 0; i < 3; i++) {
    const { d, ms } = await timed(store.acquire(limits, `late-${i}`, 100));
    times.push(ms);
    assert.equal(!d.ok && d.code, 'quota_unavailable');
    assert.ok(ms >= TIMEOUT_MS * 0.9 && ms < TIMEOUT_MS + SLACK_MS, `call ${i} took ${ms} ms`);
  }
  const { d, ms } = await timed(store.acquire(limits, 'fast', 100));
  assert.ok(ms < TIMEOUT_MS / 2, `breaker open: no wait (${ms} ms)`);
  assert.equal(!d.ok && d.retryAfterSeconds, 1);
  t.diagnostic(`paused-Redis decisions took ${times.map((x) => x.toFixed(0)).join(', ')} ms, then ${ms.toFixed(1)} ms`);
  assert.ok(store.stats().pendingSettles >= 3, 'one compensating settle per acquire whose outcome is unknown');

  redis.resume();
  resumed = true;
  // The three acquires run late inside Redis and take leases; the replayed compensations give them back.
  await untilRedisServes(store);
  const deadline = performance.now() + 5000;
  while (store.stats().pendingSettles > 0 && performance.now() < deadline) await sleep(50);
  assert.equal(store.stats().pendingSettles, 0);
  const c = await inspect();
  t.after(() => c.quit());
  assert.equal(await c.zcard(`${prefix}:{acme}:leases`), 0, 'no lease leaked');
  assert.equal(Math.floor(Number(await c.hget(`${prefix}:{acme}:tb`, 'tokens'))), 1000, 'every late reservation refunded');
});

void test('a settle that fails while Redis is down is replayed once it is back', async (t) => {
  const { store, prefix } = await makeStore('open');
  t.after(() => store.close());
  await untilRedisServes(store);
  const first = await store.acquire(limits, 'r1', 500);
  assert.equal(first.ok && !first.degraded, true);
  await redis.kill();
  await store.settle(limits, 'r1', 500, 100);
  assert.equal(store.stats().pendingSettles, 1);
  await redis.restart();
  await untilRedisServes(store);
  const deadline = performance.now() + 5000;
  while (store.stats().pendingSettles > 0 && performance.now() < deadline) await sleep(50);
  assert.equal(store.stats().pendingSettles, 0);
  assert.ok(store.stats().replayedSettles >= 1);
  const c = await inspect();
  t.after(() => c.quit());
  assert.equal(await c.zscore(`${prefix}:{acme}:leases`, 'r1'), null, 'lease released');
  const tokens = Number(await c.hget(`${prefix}:{acme}:tb`, 'tokens'));
  assert.ok(tokens >= 900 && tokens < 920, `refund of 400 applied once: ${tokens}`);
  await store.settle(limits, 'r1', 500, 100);
  assert.ok(Number(await c.hget(`${prefix}:{acme}:tb`, 'tokens')) < 920, 'a second settle refunds nothing');
});

void test('a gateway started while Redis is down serves under the policy and picks Redis up when it starts', async (t) => {
  await redis.kill();
  const t0 = performance.now();
  const { store } = await makeStore('open', 300);
  t.after(() => store.close());
  assert.ok(performance.now() - t0 < 300 + SLACK_MS, 'startup waits at most readyTimeoutMs');
  const d = await store.acquire(limits, 'r1', 10);
  assert.equal(d.ok && d.degraded, true);
  await redis.restart();
  await untilRedisServes(store);
});

void test('scripts reload by themselves after SCRIPT FLUSH (EVALSHA falls back on NOSCRIPT)', async (t) => {
  const { store } = await makeStore('closed');
  t.after(() => store.close());
  await untilRedisServes(store);
  const c = await inspect();
  t.after(() => c.quit());
  await c.script('FLUSH');
  const d = await store.acquire(limits, 'r2', 10);
  assert.equal(d.ok && !d.degraded, true);
});
