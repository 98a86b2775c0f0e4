// Redis stopped, paused and restarted mid-test under both failure policies, on a private redis-server:
// decisions follow the configured policy, a silent Redis costs one quota.timeout_ms per call until the breaker
// opens and then none, and the store recovers by itself. Durations are asserted only from below (a timeout
// that must fire does not fire early); above, a 10 s deadline catches hangs. How long each decision takes is
// a product figure: `npm run bench -- quota-outage` measures it.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';
import { createQuotaStore } from '../../../src/quota/create-quota-store.ts';
import { createRedisClient, type RedisClient } from '../../../src/quota/redis-client.ts';
import { ResilientQuotaStore } from '../../../src/quota/resilient-quota-store.ts';
import type { QuotaDecision, TenantLimits } from '../../../src/quota/types.ts';
import { OwnRedis, sleep } from './own-redis.ts';

const TIMEOUT_MS = 300;
/** Only a hang misses this (an offline queue, connect retries without end); a busy machine does not. */
const HANG_MS = 10_000;

let redis: OwnRedis;
before(async () => {
  redis = await OwnRedis.start();
});
after(() => redis.stop());

const limits: TenantLimits = Object.freeze({ name: 'acme', tokensPerSecond: 1, burstTokens: 1000, maxInflight: 4 });

async function makeStore(failureMode: 'open' | 'closed', readyTimeoutMs = 3000): Promise<{ store: ResilientQuotaStore; prefix: string }> {
  const prefix = `test:${randomUUID()}`;
  const store = await createQuotaStore(
    { backend: 'redis', redis_url: redis.url, failure_mode: failureMode, timeout_ms: TIMEOUT_MS, lease_ttl_ms: 60_000, expected_gateways: 2, key_prefix: prefix },
    { readyTimeoutMs },
  );
  assert.ok(store instanceof ResilientQuotaStore);
  return { store, prefix };
}

/** `p`, or a failure naming `what` after HANG_MS. */
async function noHang<T>(p: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const hang = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${HANG_MS} ms`)), HANG_MS);
  });
  try {
    return await Promise.race([p, hang]);
  } finally {
    clearTimeout(timer);
  }
}

interface Timed {
  d: QuotaDecision;
  ms: number;
  /**
   * Settled before the event loop's next turn: the call did no I/O, so it never waited on Redis. A command sent
   * to Redis settles on a socket read or a timer, both a later turn, however fast or loaded the machine is.
   */
  withoutIo: boolean;
}

async function decide(p: Promise<QuotaDecision>, what: string): Promise<Timed> {
  const t0 = performance.now();
  let turned = false;
  setImmediate(() => { turned = true; });
  const d = await noHang(p, what);
  return { d, ms: performance.now() - t0, withoutIo: !turned };
}

async function inspect(): Promise<RedisClient> {
  const c = createRedisClient(redis.url, { connectTimeoutMs: 1000, commandTimeoutMs: 1000 });
  await new Promise((r) => c.once('ready', r));
  return c;
}

async function untilRedisServes(store: ResilientQuotaStore, maxMs = HANG_MS): Promise<number> {
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
  const { d } = await decide(store.acquire(limits, 'r2', 100), 'fail-open decision with Redis killed');
  assert.equal(d.ok, true);
  assert.equal(d.ok && d.degraded, true);
  // 1/expected_gateways of the tenant's limits: 500 tokens, 2 requests in flight
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
    const { d } = await decide(store.acquire(limits, `r-${i}`, 100), `fail-closed decision ${i} with Redis killed`);
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
  // The breaker opens after 3 consecutive failures. A replay of a queued compensation that times out in the
  // meantime counts as one of them, so it may open after 2 calls: at most 3 calls wait, and each waits a whole
  // timeout (the client's commandTimeout firing, never earlier).
  const waited: number[] = [];
  let open: Timed | null = null;
  for (let i = 0; open === null; i++) {
    const call = await decide(store.acquire(limits, `late-${i}`, 100), `paused-Redis decision ${i}`);
    assert.equal(!call.d.ok && call.d.code, 'quota_unavailable');
    if (call.withoutIo) {
      open = call;
      break;
    }
    assert.ok(call.ms >= TIMEOUT_MS * 0.95, `call ${i} answered after ${call.ms.toFixed(0)} ms, before the ${TIMEOUT_MS} ms timeout`);
    waited.push(call.ms);
    assert.ok(waited.length <= 3, `call ${i} still waited on Redis: the breaker never opened`);
  }
  assert.ok(waited.length >= 1, 'the first call went to Redis: the breaker starts closed');
  assert.equal(!open.d.ok && open.d.retryAfterSeconds, 1, 'the breaker\'s remaining cooldown, rounded up');
  t.diagnostic(`paused-Redis decisions took ${waited.map((x) => x.toFixed(0)).join(', ')} ms, then ${open.ms.toFixed(2)} ms with the breaker open`);
  assert.ok(store.stats().pendingSettles >= waited.length, 'one compensating settle per acquire whose outcome is unknown');

  redis.resume();
  resumed = true;
  // The acquires that waited run late inside Redis and take leases; the replayed compensations give them back.
  await untilRedisServes(store);
  const deadline = performance.now() + HANG_MS;
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
  const deadline = performance.now() + HANG_MS;
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
  // readyTimeoutMs bounds the wait; the hang deadline is what catches a startup that waits for Redis forever.
  const starting = makeStore('open', 300);
  t.after(() => void starting.then(({ store }) => store.close())); // also when it answers after the deadline
  const { store } = await noHang(starting, 'startup with Redis down');
  const startupMs = performance.now() - t0;
  assert.ok(startupMs >= 300 * 0.95, `startup gave Redis its readyTimeoutMs before serving (${startupMs.toFixed(0)} ms)`);
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
