// The real gateway with `quota.backend: redis` on the shared Redis (REDIS_URL, a key prefix unique to this
// run, every key deleted at the end). What a client sees: 429 rate_limit_exceeded with a Retry-After the
// bucket honours and x-ratelimit-* headers, 429 concurrency_limit_exceeded past max_inflight. What Redis
// holds afterwards (keys per src/quota/keys.ts: <prefix>:{tenant}:tb HASH, <prefix>:{tenant}:leases ZSET):
// after a success, an upstream error, a client cancel and a retried request every lease is released and the
// bucket equals burst minus exactly what was charged, i.e. each reservation was refunded once.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { createRedisClient, type RedisClient } from '../../../src/quota/redis-client.ts';
import { DEFAULT_POOL, startStack, waitFor, type TestStack } from '../../helpers/start-gateway.ts';
import { openStream, type OpenStream } from '../mock-replica/http-client.ts';
import type { UsageRecord } from '../../../src/usage/usage-record.ts';
import { REDIS_URL } from '../../helpers/redis.ts';

const PREFIX = `test:quota-ops:${randomUUID()}`;
const sha = (k: string): string => createHash('sha256').update(k).digest('hex');
const LIMITED_KEY = 'sk-ops-limited';
const ACCT_KEY = 'sk-ops-acct';
// limited: a small bucket that refills fast enough for its Retry-After to be waited out in a test
const LIMITED = { rate: 500, burst: 2000, maxInflight: 2 };
// acct: a bucket that barely refills (0.001 token/s), so its level is exactly burst - charged
const ACCT = { rate: 0.001, burst: 100_000, maxInflight: 16 };
const PROMPT = [{ role: 'user', content: 'quota check' }];

let stack: TestStack;
let redis: RedisClient;
const keysOf = (tenant: string): { bucket: string; leases: string } => ({ bucket: `${PREFIX}:{${tenant}}:tb`, leases: `${PREFIX}:{${tenant}}:leases` });

before(async () => {
  redis = createRedisClient(REDIS_URL, { connectTimeoutMs: 1000, commandTimeoutMs: 2000 });
  stack = await startStack({
    pools: [{ ...DEFAULT_POOL, engine: { tpot_target_ms: 1000 } }],
    config: {
      routing: { policy: 'round-robin' },
      registry: { scrape_interval_ms: 50, scrape_timeout_ms: 2000, down_after_failures: 50 },
      // The tests slow the mocks to 100 ms per token to hold streams open, which admission in GPU time would
      // rightly shed against the default 50 ms TPOT target: this file is about quota, so the SLO is loose.
      admission: { ttft_ms_by_tier: { standard: 10_000 } },
      // a generous timeout: this is about semantics, not Redis latency on a loaded machine
      quota: { backend: 'redis', redis_url: REDIS_URL, key_prefix: PREFIX, failure_mode: 'closed', timeout_ms: 2000 },
      tenants: [
        { name: 'limited', api_keys: [{ sha256: sha(LIMITED_KEY) }], tokens_per_second: LIMITED.rate, burst_tokens: LIMITED.burst, max_inflight: LIMITED.maxInflight },
        { name: 'acct', api_keys: [{ sha256: sha(ACCT_KEY) }], tokens_per_second: ACCT.rate, burst_tokens: ACCT.burst, max_inflight: ACCT.maxInflight },
      ],
    },
  });
});

after(async () => {
  await stack.close();
  const keys = await redis.keys(`${PREFIX}:*`);
  if (keys.length > 0) await redis.del(...keys);
  await redis.quit();
});

async function fault(replica: string, spec: Record<string, unknown>): Promise<void> {
  const res = await fetch(`${stack.replicas.get(replica)!.url}/_mock/faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(spec) });
  assert.equal(res.status, 200);
}
const faultBoth = async (spec: Record<string, unknown>): Promise<void> => {
  await fault('8b-1', spec);
  await fault('8b-2', spec);
};

function chat(key: string, id: string, body: Record<string, unknown>): Promise<Response> {
  return fetch(`${stack.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-request-id': id },
    body: JSON.stringify({ model: 'gpt-fast', messages: PROMPT, ...body }),
  });
}

function stream(key: string, id: string, maxTokens: number): OpenStream {
  return openStream(stack.url, '/v1/chat/completions', { model: 'gpt-fast', messages: PROMPT, max_tokens: maxTokens, stream: true, ignore_eos: true },
    { authorization: `Bearer ${key}`, 'x-request-id': id });
}

async function usageOf(id: string): Promise<UsageRecord> {
  return waitFor(async () => (await stack.usage()).find((r) => r.request_id === id), 10_000, 20);
}

const inflight = (tenant: string): Promise<number> => redis.zcard(keysOf(tenant).leases);

test('429 rate_limit_exceeded carries x-ratelimit-* figures and a Retry-After after which the request is admitted', async () => {
  // The prompt's token count, from a cheap request on a full bucket.
  const probe = await chat(LIMITED_KEY, 'rl-probe', { max_tokens: 1 });
  assert.equal(probe.status, 200);
  await probe.text();
  const promptTokens = (await usageOf('rl-probe')).input_tokens;
  assert.ok(promptTokens > 0);
  // Hold most of the bucket with a slow stream: its reservation stays taken while it runs.
  await faultBoth({ mode: 'slow', delay_ms: 100 });
  const holder = stream(LIMITED_KEY, 'rl-holder', 1850);
  await holder.waitFrames(2);

  // A deficit of ~1,900 tokens at 500 tokens/s: still refused even if this machine stalls for 3 s here.
  const maxTokens = 1900;
  const cost = promptTokens + maxTokens;
  const refused = await chat(LIMITED_KEY, 'rl-refused', { max_tokens: maxTokens });
  const body = await refused.json() as { error: { code: string; type: string } };
  assert.equal(refused.status, 429);
  assert.equal(body.error.code, 'rate_limit_exceeded');
  assert.equal(body.error.type, 'rate_limit_error');
  const h = (n: string): string | null => refused.headers.get(n);
  assert.equal(h('x-ratelimit-limit-tokens'), String(LIMITED.burst));
  assert.equal(h('x-ratelimit-limit-requests'), String(LIMITED.maxInflight));
  assert.equal(h('x-ratelimit-remaining-requests'), '1', 'the holder has one of two slots');
  const remaining = Number(h('x-ratelimit-remaining-tokens'));
  assert.ok(remaining < cost, `remaining ${remaining} < cost ${cost}`);
  const resetS = Number(/^(\d+)s$/.exec(h('x-ratelimit-reset-tokens') ?? '')?.[1]);
  assert.ok(Math.abs(resetS - (LIMITED.burst - remaining) / LIMITED.rate) <= 1, `reset ${resetS}s for ${remaining} of ${LIMITED.burst}`);
  const retryAfterS = Number(h('retry-after'));
  // The bucket holds between `remaining` and `remaining + 1` tokens: the wait is (cost - tokens) / rate, rounded up.
  const lo = Math.max(1, Math.ceil((cost - remaining - 1) / LIMITED.rate));
  const hi = Math.max(1, Math.ceil((cost - remaining) / LIMITED.rate));
  assert.ok(retryAfterS >= lo && retryAfterS <= hi, `Retry-After ${retryAfterS} s, expected ${lo}..${hi} for a deficit of ${cost - remaining} tokens at ${LIMITED.rate}/s`);
  assert.equal(await inflight('limited'), 1, 'the refused request holds no lease');

  await new Promise((r) => setTimeout(r, retryAfterS * 1000));
  const admitted = await chat(LIMITED_KEY, 'rl-after-wait', { max_tokens: maxTokens });
  assert.equal(admitted.status, 200, 'admitted once the stated Retry-After has passed');
  await admitted.text();

  holder.destroy();
  await faultBoth({ mode: 'none' });
  await waitFor(async () => (await inflight('limited')) === 0, 5000, 20);
});

test('429 concurrency_limit_exceeded past max_inflight, and the slots come back when the streams end', async () => {
  await redis.del(keysOf('limited').bucket); // a full bucket again: this test is about slots
  await faultBoth({ mode: 'slow', delay_ms: 100 });
  const a = stream(LIMITED_KEY, 'cc-a', 50);
  const b = stream(LIMITED_KEY, 'cc-b', 50);
  await Promise.all([a.waitFrames(1), b.waitFrames(1)]);
  assert.equal(await inflight('limited'), 2);
  const third = await chat(LIMITED_KEY, 'cc-c', { max_tokens: 5 });
  const body = await third.json() as { error: { code: string } };
  assert.equal(third.status, 429);
  assert.equal(body.error.code, 'concurrency_limit_exceeded');
  assert.equal(third.headers.get('x-ratelimit-remaining-requests'), '0');
  const retryAfterS = Number(third.headers.get('retry-after'));
  assert.ok(Number.isInteger(retryAfterS) && retryAfterS >= 1 && retryAfterS <= 600, `Retry-After ${retryAfterS}`);
  a.destroy();
  b.destroy();
  await waitFor(async () => (await inflight('limited')) === 0, 5000, 20);
  await faultBoth({ mode: 'none' });
  const again = await chat(LIMITED_KEY, 'cc-d', { max_tokens: 5 });
  assert.equal(again.status, 200, 'a slot is free again');
  await again.text();
});

test('after a success, an upstream error, a cancel and a retry: no lease left, each reservation refunded once', async () => {
  const ids: string[] = [];

  const ok = await chat(ACCT_KEY, 'acct-ok', { max_tokens: 300 });
  assert.equal(ok.status, 200);
  await ok.json();
  ids.push('acct-ok');
  const okStream = await chat(ACCT_KEY, 'acct-ok-stream', { max_tokens: 40, stream: true, ignore_eos: true });
  assert.equal(okStream.status, 200);
  await okStream.text();
  ids.push('acct-ok-stream');

  await faultBoth({ mode: 'error_before_first_token', status: 500 });
  const failed = await chat(ACCT_KEY, 'acct-502', { max_tokens: 200, stream: true });
  assert.equal(failed.status, 502);
  await failed.text();
  ids.push('acct-502');

  await faultBoth({ mode: 'slow', delay_ms: 50 });
  const s = stream(ACCT_KEY, 'acct-cancel', 400);
  await s.waitFrames(3);
  assert.equal(await inflight('acct'), 1, 'the stream holds its lease');
  s.destroy();
  ids.push('acct-cancel');
  await faultBoth({ mode: 'none' });

  // 8b-1 fails its next completion before the first token. Round robin reaches it within two requests
  // unless admission passes it over (a loaded machine may still count the cancelled stream in flight there),
  // so up to six are sent; the fault fires once, and the loop ends with the request that met it.
  await fault('8b-1', { mode: 'error_before_first_token', status: 500, count: 1 });
  let retried = false;
  const served: string[] = [];
  for (let i = 0; i < 6 && !retried; i++) {
    const res = await chat(ACCT_KEY, `acct-retry-${i}`, { max_tokens: 30, stream: true, ignore_eos: true });
    assert.equal(res.status, 200);
    await res.text();
    ids.push(`acct-retry-${i}`);
    const rec = await usageOf(`acct-retry-${i}`);
    served.push(`${rec.replica ?? '-'}/${rec.retries}`);
    retried = rec.retries === 1;
  }
  assert.ok(retried, `one request was retried on the other replica (replica/retries of each: ${served.join(', ')})`);
  await fault('8b-1', { mode: 'none' });

  const recs = await Promise.all(ids.map(usageOf));
  await waitFor(async () => (await inflight('acct')) === 0, 5000, 20);

  // Charged = prompt + output for requests that produced output, 0 for the rest; refunds give back the rest of
  // each reservation exactly once. The bucket refills 0.001 token/s: well under one token over this test.
  const charged = (r: UsageRecord): number => (r.ttft_ms !== null || r.status === 200 ? r.input_tokens + r.output_tokens : 0);
  const totalCharged = recs.reduce((n, r) => n + charged(r), 0);
  const byId = new Map(recs.map((r) => [r.request_id, r]));
  assert.equal(charged(byId.get('acct-502')!), 0, 'an upstream error before the first token is not charged');
  assert.equal(byId.get('acct-ok-stream')!.output_tokens, 40);
  assert.ok(charged(byId.get('acct-cancel')!) >= byId.get('acct-cancel')!.input_tokens + 2, 'a cancelled stream pays for the tokens it was sent');
  const tokens = Number(await redis.hget(keysOf('acct').bucket, 'tokens'));
  assert.ok(Math.abs(tokens - (ACCT.burst - totalCharged)) < 1,
    `bucket ${tokens} = burst ${ACCT.burst} - charged ${totalCharged} (${recs.map((r) => `${r.request_id}:${charged(r)}`).join(', ')})`);
});
