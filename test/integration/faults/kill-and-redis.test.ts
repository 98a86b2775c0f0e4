// A replica process SIGKILLed with streams running on it, and the quota's Redis killed and restarted, each
// with a burst of concurrent requests in flight. The streams already under way on the dead replica end
// with one error event; everything else succeeds (elsewhere; under fail-open while Redis is away). One usage
// record per request; no lease left in the store (Redis itself checked after it returns); the in-flight
// ledger back to zero.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { test } from 'node:test';
import { createRedisClient } from '../../../src/quota/redis-client.ts';
import type { ResilientQuotaStore } from '../../../src/quota/resilient-quota-store.ts';
import { waitFor } from '../../helpers/start-gateway.ts';
import { OwnRedis, sleep } from '../quota/own-redis.ts';
import { assertAnswers, assertSettled, burst, quotaNow, startFleet } from './fleet-under-load.ts';

test('a replica SIGKILLed mid-burst cuts only its started streams; the rest and the next burst succeed', async (t) => {
  // Non-streamed answers of 200 tokens on a loaded machine: no request timeout of a few seconds here.
  const fleet = await startFleet({ processes: 1, inProcess: 2 }, {
    config: { upstream: { connect_timeout_ms: 1000, first_token_timeout_ms: 5000, request_timeout_ms: 60_000, max_attempts: 3 } },
  });
  t.after(() => fleet.close());
  const quota = await quotaNow(fleet);
  const maxTokens = 200;
  const seen = burst(fleet.stack.url, 'kill', 30, maxTokens);
  // Kill once two of the victim's streams are under way (their first token reached the client).
  const onVictim = seen.filter((s) => s.stream);
  await waitFor(() => onVictim.filter((s) => s.replica === fleet.ids[0]).length >= 2, 10_000);
  await fleet.replicas[0]!.process!.kill('SIGKILL');
  await Promise.all(seen.map((s) => s.finished));
  const cut = assertAnswers(seen, maxTokens);
  assert.ok(cut.length >= 2, `the started streams on the killed replica were cut (${cut.length})`);
  assert.ok(cut.every((s) => s.replica === fleet.ids[0]), 'only the killed replica\'s streams');
  // The dead replica is out of rotation: a second burst all succeeds on the other two.
  const next = burst(fleet.stack.url, 'after-kill', 20, 20);
  await Promise.all(next.map((s) => s.finished));
  assert.equal(assertAnswers(next, 20).length, 0);
  assert.ok(next.every((s) => s.replica !== fleet.ids[0]));
  await assertSettled(fleet, [...seen, ...next], quota);
  t.diagnostic(`${cut.length} streams cut of ${seen.filter((s) => s.replica === fleet.ids[0]).length} answered by the killed replica`);
});

test('Redis killed and restarted under a burst (fail-open): every request succeeds, every lease is released in Redis', async (t) => {
  const redis = await OwnRedis.start();
  const prefix = `faults:${randomUUID()}`;
  const fleet = await startFleet({ inProcess: 2 }, {
    config: { quota: { backend: 'redis', redis_url: redis.url, failure_mode: 'open', timeout_ms: 200, key_prefix: prefix } },
  });
  // One hook, in order: the gateway (and its Redis client) first, then Redis.
  t.after(async () => {
    await fleet.close();
    await redis.stop();
  });
  const store = fleet.stack.gateway.services.quota as ResilientQuotaStore;
  await waitFor(() => store.stats().redisUp, 5000);
  const maxTokens = 60;
  const seen = burst(fleet.stack.url, 'redis', 30, maxTokens);
  await sleep(30);
  await redis.kill();
  // Requests arriving while Redis is away.
  const during = burst(fleet.stack.url, 'redis-down', 10, maxTokens);
  await Promise.all([...seen, ...during].map((s) => s.finished));
  await redis.restart();
  await waitFor(() => store.stats().redisUp && store.stats().pendingSettles === 0, 10_000, 50);
  const afterBurst = burst(fleet.stack.url, 'redis-back', 10, maxTokens);
  await Promise.all(afterBurst.map((s) => s.finished));
  const all = [...seen, ...during, ...afterBurst];
  assert.equal(assertAnswers(all, maxTokens).length, 0, 'no stream is cut by a quota outage');
  // Records, ledger, in-flight count; the bucket's exact figure is not checked: admissions made while Redis
  // was away were charged to the local share, not to Redis.
  await assertSettled(fleet, all, null);
  const stats = store.stats();
  assert.ok(stats.degradedAdmissions >= 1, 'some requests were admitted while Redis was away');
  assert.equal(stats.droppedSettles, 0);
  const c = createRedisClient(redis.url, { connectTimeoutMs: 1000, commandTimeoutMs: 1000 });
  await new Promise((r) => c.once('ready', r));
  const [leases, tokens] = await Promise.all([c.zcard(`${prefix}:{alpha}:leases`), c.hget(`${prefix}:{alpha}:tb`, 'tokens').then(Number)]);
  await c.quit();
  assert.equal(leases, 0, 'no lease left in Redis');
  assert.ok(tokens <= 10_000_000 && tokens > 10_000_000 - 50 * 200, `Redis bucket ${tokens}: refunds applied once`);
});
