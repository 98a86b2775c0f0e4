// The real gateway (src/gateway.ts wiring, uWS on port 0) with its quota in a private redis-server: what a
// client sees (429 + Retry-After + x-ratelimit-*, 503 quota_unavailable) and what Redis holds afterwards
// (every lease released once, refunds applied once) after success, upstream error, retry and client cancel.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';
import { createRedisClient, type RedisClient } from '../../../src/quota/redis-client.ts';
import { TINY_KEY, startStack, waitFor, type TestStack } from '../../helpers/start-gateway.ts';
import { openStream } from '../mock-replica/http-client.ts';
import type { UsageRecord } from '../../../src/usage/usage-record.ts';
import { OwnRedis } from './own-redis.ts';

// Generous: this file checks what the client sees, not timing (`npm run bench -- quota-outage` measures it).
const TIMEOUT_MS = 1000;
/** Deadline for waits on a condition: only a hang misses it, a busy machine does not. */
const HANG_MS = 10_000;
let redis: OwnRedis;
let stack: TestStack;
let admin: RedisClient;
const prefix = `test:${randomUUID()}`;
const LEASES = `${prefix}:{tiny}:leases`;
const BUCKET = `${prefix}:{tiny}:tb`;
const tiny = { authorization: `Bearer ${TINY_KEY}`, 'content-type': 'application/json' }; // 4,000 burst, 100 tokens/s, 2 in flight

before(async () => {
  redis = await OwnRedis.start();
  stack = await startStack({
    pools: [{ id: '8b', model: 'llama-3.1-8b-instruct', aliases: ['gpt-fast'], replicas: [{ profile: 'tiny' }, { profile: 'tiny' }] }],
    config: {
      quota: { backend: 'redis', redis_url: redis.url, key_prefix: prefix, failure_mode: 'closed', timeout_ms: TIMEOUT_MS },
      // The retry step needs identical prompts to reach both replicas: kv-aware would keep them on one.
      routing: { policy: 'least-outstanding-tokens' },
    },
  });
  admin = createRedisClient(redis.url, { connectTimeoutMs: 1000, commandTimeoutMs: 1000 });
  await new Promise((r) => admin.once('ready', r));
});

after(async () => {
  redis.resume();
  await stack.close();
  await admin.quit();
  await redis.stop();
});

const fault = (replica: '8b-1' | '8b-2', body: Record<string, unknown>): Promise<Response> =>
  fetch(`${stack.replicas.get(replica)!.url}/_mock/faults`, { method: 'POST', body: JSON.stringify(body) });
const faultBoth = async (body: Record<string, unknown>): Promise<void> => {
  await fault('8b-1', body);
  await fault('8b-2', body);
};
const chat = (id: string, maxTokens: number, extra: Record<string, unknown> = {}): Promise<Response> =>
  fetch(`${stack.url}/v1/chat/completions`, {
    method: 'POST', headers: { ...tiny, 'x-request-id': id }, signal: AbortSignal.timeout(HANG_MS),
    body: JSON.stringify({ model: 'gpt-fast', messages: [{ role: 'user', content: 'hi' }], max_tokens: maxTokens, ...extra }),
  });
const tokens = async (): Promise<number> => Number(await admin.hget(BUCKET, 'tokens'));
const leasesEmpty = async (): Promise<boolean> => (await admin.zcard(LEASES)) === 0;
async function usageOf(id: string): Promise<UsageRecord> {
  const rec = await waitFor(async () => (await stack.usage()).find((r) => r.request_id === id), HANG_MS);
  assert.ok(rec);
  return rec;
}

void test('a success is charged prompt + output tokens once: the unused reservation is refunded', async () => {
  const res = await chat('ok-1', 300);
  assert.equal(res.status, 200);
  await res.json();
  assert.equal(res.headers.get('x-ratelimit-limit-tokens'), '4000');
  assert.equal(res.headers.get('x-ratelimit-limit-requests'), '2');
  const rec = await usageOf('ok-1');
  const remainingAtAdmission = Number(res.headers.get('x-ratelimit-remaining-tokens'));
  assert.equal(remainingAtAdmission, 4000 - rec.input_tokens - 300, 'reserved prompt + max_tokens');
  assert.ok(rec.output_tokens < 300, `something to refund (output ${rec.output_tokens})`);
  await waitFor(leasesEmpty, HANG_MS);
  const after = await tokens();
  const charged = rec.input_tokens + rec.output_tokens;
  // refill at 100 tokens/s during the request may have topped it up, never past burst
  assert.ok(after >= 4000 - charged - 1 && after <= 4000, `bucket ${after}, charged ${charged}`);
});

void test('a request beyond the bucket gets 429 rate_limit_exceeded with a retry-after from the bucket', async () => {
  const [sec, usec] = await admin.time();
  await admin.hset(BUCKET, 'tokens', 3000, 'ts', Number(sec) * 1000 + Number(usec) / 1000);
  // An in-flight stream keeps its whole reservation (prompt + 1,990) until it ends.
  await faultBoth({ mode: 'slow', delay_ms: 100 });
  const held = openStream(stack.url, '/v1/chat/completions', { model: 'gpt-fast', messages: [{ role: 'user', content: 'hi' }], max_tokens: 1990, stream: true, ignore_eos: true }, { ...tiny, 'x-request-id': 'held-1' });
  await held.head;
  const res = await chat('big-1', 1990); // the same prompt and max_tokens again: ~1,000 tokens short
  const body = await res.json() as { error: { code: string } };
  assert.equal(res.status, 429);
  assert.equal(body.error.code, 'rate_limit_exceeded');
  const retryAfterS = Number(res.headers.get('retry-after'));
  const remainingNow = Number(res.headers.get('x-ratelimit-remaining-tokens'));
  assert.equal(await admin.zcard(LEASES), 1, 'the refused request took no lease');
  held.destroy();
  const cost = (await usageOf('held-1')).input_tokens + 1990;
  // the bucket held between remainingNow and remainingNow + 1 tokens; the refill is 100 tokens/s
  const lo = Math.ceil((cost - remainingNow - 1) / 100);
  const hi = Math.ceil((cost - remainingNow) / 100);
  assert.ok(retryAfterS >= lo && retryAfterS <= hi && retryAfterS >= 10, `retry-after ${retryAfterS}, expected ${lo}..${hi}`);
  await waitFor(leasesEmpty, HANG_MS);
  await faultBoth({ mode: 'none' });
});

void test('leases are released after an upstream error, a retried success and a client cancel', async () => {
  await admin.hset(BUCKET, 'tokens', 4000); // refill by hand: this test is about leases
  await faultBoth({ mode: 'error_before_first_token', status: 500 });
  const failed = await chat('err-1', 10);
  assert.ok(failed.status >= 500, `status ${failed.status}`);
  await failed.text();
  await usageOf('err-1');
  await waitFor(leasesEmpty, HANG_MS);
  await faultBoth({ mode: 'none' });

  // One replica fails its next request before the first token: whichever request lands there is retried.
  await fault('8b-1', { mode: 'error_before_first_token', status: 500, count: 1 });
  let retries = 0;
  for (let i = 0; i < 6 && retries === 0; i++) {
    const res = await chat(`retry-${i}`, 10);
    assert.equal(res.status, 200);
    await res.json();
    retries = (await usageOf(`retry-${i}`)).retries;
    await waitFor(leasesEmpty, HANG_MS);
  }
  assert.equal(retries, 1, 'a request was retried on the other replica');
  await fault('8b-1', { mode: 'none' });

  await faultBoth({ mode: 'slow', delay_ms: 50 });
  const s = openStream(stack.url, '/v1/chat/completions', { model: 'gpt-fast', messages: [{ role: 'user', content: 'x' }], max_tokens: 200, stream: true, ignore_eos: true }, { ...tiny, 'x-request-id': 'cancel-1' });
  await s.waitFrames(2);
  assert.equal(await admin.zcard(LEASES), 1, 'the stream holds its lease');
  s.destroy();
  assert.equal((await usageOf('cancel-1')).cancelled, true);
  await waitFor(leasesEmpty, HANG_MS);
  await faultBoth({ mode: 'none' });
});

void test('with Redis paused, fail-closed answers 503 quota_unavailable once the quota timeout fires, then recovers', async () => {
  redis.pause();
  const t0 = performance.now();
  const res = await chat('paused-1', 10); // a hang (no timeout on the Redis call) aborts at HANG_MS
  const ms = performance.now() - t0;
  const body = await res.json() as { error: { code: string } };
  assert.equal(res.status, 503);
  assert.equal(body.error.code, 'quota_unavailable');
  assert.ok(Number(res.headers.get('retry-after')) >= 1);
  // The first call after a healthy spell goes to Redis (the breaker is closed) and waits out quota.timeout_ms.
  assert.ok(ms >= TIMEOUT_MS * 0.95, `answered after ${ms.toFixed(0)} ms, before the ${TIMEOUT_MS} ms quota timeout`);
  redis.resume();
  await waitFor(async () => {
    const r = await chat(`after-${randomUUID()}`, 10);
    await r.text();
    return r.status === 200;
  }, HANG_MS, 100);
  await waitFor(leasesEmpty, HANG_MS);
});
