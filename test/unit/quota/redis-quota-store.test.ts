// The shared behaviour suite against the real Redis at REDIS_URL, each test under its own key prefix, plus
// what only the Redis backend has: Redis TIME as the clock and the hash-tagged key schema.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { useTestRedis } from '../../helpers/redis.ts';
import { RedisQuotaStore } from '../../../src/quota/redis-quota-store.ts';
import { runStoreBehaviourSuite } from './store-behaviour.ts';

const redis = useTestRedis();
const freshPrefix = (): string => redis.freshPrefix();

runStoreBehaviourSuite('redis', (clock, leaseTtlMs) =>
  Promise.resolve(new RedisQuotaStore(redis.client, { keyPrefix: freshPrefix(), leaseTtlMs, clock: clock.now, sharedClient: true, renewLeases: false })));

void test('redis: without an injected clock the bucket runs on Redis TIME', async () => {
  const prefix = freshPrefix();
  const store = new RedisQuotaStore(redis.client, { keyPrefix: prefix, leaseTtlMs: 60_000, sharedClient: true });
  const a = { name: 'acme', tokensPerSecond: 1000, burstTokens: 1000, maxInflight: 5 };
  assert.equal((await store.acquire(a, 'r1', 1000)).ok, true);
  const [sec, usec] = await redis.client.time();
  const redisNowMs = Number(sec) * 1000 + Number(usec) / 1000;
  const ts = Number(await redis.client.hget(`${prefix}:{acme}:tb`, 'ts'));
  assert.ok(Math.abs(redisNowMs - ts) < 1000, `bucket ts ${ts} vs Redis TIME ${redisNowMs}`);
  const leaseExpiry = Number(await redis.client.zscore(`${prefix}:{acme}:leases`, 'r1'));
  assert.ok(Math.abs(leaseExpiry - (ts + 60_000)) < 1, 'lease expiry = TIME + ttl');
  // real time refills: ~200 ms later about 200 tokens are back
  await new Promise((r) => setTimeout(r, 200));
  const d = await store.acquire(a, 'r2', 0);
  assert.ok(d.remainingTokens >= 150 && d.remainingTokens <= 1000, `remaining ${d.remainingTokens}`);
});

void test('redis: keys are hash-tagged by tenant and expire when idle', async () => {
  const prefix = freshPrefix();
  const store = new RedisQuotaStore(redis.client, { keyPrefix: prefix, leaseTtlMs: 1000, sharedClient: true });
  const a = { name: 'acme.eu-1', tokensPerSecond: 100, burstTokens: 200, maxInflight: 5 };
  assert.equal((await store.acquire(a, 'r1', 100)).ok, true);
  assert.deepEqual((await redis.client.keys(`${prefix}:*`)).sort(), [`${prefix}:{acme.eu-1}:leases`, `${prefix}:{acme.eu-1}:tb`]);
  const bucketTtlMs = await redis.client.pttl(`${prefix}:{acme.eu-1}:tb`);
  assert.ok(bucketTtlMs > 60_000 && bucketTtlMs <= 61_000, `bucket ttl ${bucketTtlMs}: time to full (1 s) + 60 s`);
  const leasesTtlMs = await redis.client.pttl(`${prefix}:{acme.eu-1}:leases`);
  assert.ok(leasesTtlMs > 60_000 && leasesTtlMs <= 61_000, `leases ttl ${leasesTtlMs}: lease ttl + 60 s`);
  assert.throws(() => new RedisQuotaStore(redis.client, { keyPrefix: 'bad{x}', leaseTtlMs: 1000, sharedClient: true }), /braces/);
});
