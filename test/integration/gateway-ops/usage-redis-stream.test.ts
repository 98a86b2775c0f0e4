// Usage records through the `redis-stream:KEY` sink of the real gateway (real Redis at REDIS_URL, a stream
// key unique to this run, deleted at the end): after a success, a non-streaming success, an upstream error,
// a 404, a 429, a client cancel mid-stream and an abandoned non-streaming request, XRANGE holds exactly one
// entry per authenticated request, each with the contract's fields and the values that request earned. A
// request with a bad key leaves no record.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { createRedisClient, type RedisClient } from '../../../src/quota/redis-client.ts';
import { ALPHA_KEY, TINY_KEY, startStack, waitFor, type TestStack } from '../../helpers/start-gateway.ts';
import { openStream } from '../mock-replica/http-client.ts';
import type { UsageRecord } from '../../../src/usage/usage-record.ts';
import { REDIS_URL } from '../../helpers/redis.ts';

const STREAM_KEY = `test:usage:${randomUUID()}`;
const CONTRACT_FIELDS = ['request_id', 'tenant', 'model', 'pool', 'adapter', 'replica', 'status', 'finish_reason', 'input_tokens',
  'output_tokens', 'cached_tokens', 'predicted_cached_tokens', 'ttft_ms', 'duration_ms', 'retries', 'cancelled', 'queue_ms', 'ts'].sort();
const sha = (k: string): string => createHash('sha256').update(k).digest('hex');
const run = `us${Date.now().toString(36)}`;

let stack: TestStack;
let redis: RedisClient;

before(async () => {
  redis = createRedisClient(REDIS_URL, { connectTimeoutMs: 1000, commandTimeoutMs: 2000 });
  stack = await startStack({
    config: {
      routing: { policy: 'round-robin' },
      registry: { scrape_interval_ms: 50, scrape_timeout_ms: 2000, down_after_failures: 50 },
      quota: { backend: 'memory', redis_url: REDIS_URL },
      usage: { sinks: [`redis-stream:${STREAM_KEY}`] },
      tenants: [
        { name: 'alpha', api_keys: [{ sha256: sha(ALPHA_KEY) }], tokens_per_second: 1_000_000, burst_tokens: 10_000_000, max_inflight: 256 },
        { name: 'tiny', api_keys: [{ sha256: sha(TINY_KEY) }], tokens_per_second: 1, burst_tokens: 100, max_inflight: 2 },
      ],
    },
  });
});

after(async () => {
  await stack.close();
  await redis.del(STREAM_KEY);
  await redis.quit();
});

async function fault(replica: string, spec: Record<string, unknown>): Promise<void> {
  const res = await fetch(`${stack.replicas.get(replica)!.url}/_mock/faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(spec) });
  assert.equal(res.status, 200);
}

async function chat(key: string, id: string, body: Record<string, unknown>, signal?: AbortSignal): Promise<Response> {
  return fetch(`${stack.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-request-id': id },
    body: JSON.stringify({ model: 'gpt-fast', messages: [{ role: 'user', content: 'hello there' }], ...body }),
    ...(signal ? { signal } : {}),
  });
}

async function streamEntries(): Promise<Array<{ id: string; fields: string[] }>> {
  await stack.gateway.services.usage.flush();
  const raw = await redis.xrange(STREAM_KEY, '-', '+');
  return raw.map(([id, fields]) => ({ id, fields }));
}

test('XRANGE holds one entry per request with the contract fields and the right values', async () => {
  const startedAt = Date.now();

  const ok = await chat(ALPHA_KEY, `${run}-ok`, { stream: true, max_tokens: 5, ignore_eos: true, stream_options: { include_usage: true } });
  assert.equal(ok.status, 200);
  await ok.text();

  const plain = await chat(ALPHA_KEY, `${run}-plain`, { model: 'llama-3.1-8b-instruct', max_tokens: 3, ignore_eos: true });
  assert.equal(plain.status, 200);
  await plain.json();

  const missing = await chat(ALPHA_KEY, `${run}-404`, { model: 'no-such-model', max_tokens: 3 });
  assert.equal(missing.status, 404);
  await missing.text();

  const limited = await chat(TINY_KEY, `${run}-429`, { max_tokens: 200 });
  assert.equal(limited.status, 429);
  await limited.text();

  const badKey = await chat('sk-not-a-key', `${run}-401`, { max_tokens: 3 });
  assert.equal(badKey.status, 401);
  await badKey.text();

  await fault('8b-1', { mode: 'error_before_first_token', status: 500 });
  await fault('8b-2', { mode: 'error_before_first_token', status: 500 });
  const failed = await chat(ALPHA_KEY, `${run}-502`, { stream: true, max_tokens: 3 });
  assert.equal(failed.status, 502);
  await failed.text();

  await fault('8b-1', { mode: 'slow', delay_ms: 40 });
  await fault('8b-2', { mode: 'slow', delay_ms: 40 });
  const s = openStream(stack.url, '/v1/chat/completions', { model: 'gpt-fast', messages: [{ role: 'user', content: 'long' }], max_tokens: 200, stream: true, ignore_eos: true },
    { authorization: `Bearer ${ALPHA_KEY}`, 'x-request-id': `${run}-cancel` });
  await s.waitFrames(3);
  s.destroy();
  // a non-streaming request abandoned while the replica is still generating
  const ac = new AbortController();
  const abandoned = chat(ALPHA_KEY, `${run}-cancel-plain`, { max_tokens: 100, ignore_eos: true, stream: false }, ac.signal);
  const engines = [...stack.replicas.values()].map((r) => r.engine);
  const phase = (): string | undefined => engines.map((e) => e.snapshot().requests.find((r) => r.id === `${run}-cancel-plain`)?.state).find((x) => x !== undefined);
  await waitFor(() => phase() === 'running', 5000, 5);
  ac.abort();
  await abandoned.then(() => assert.fail('the aborted fetch resolved'), (err: Error) => assert.equal(err.name, 'AbortError'));
  await waitFor(() => phase() === 'aborted', 2000, 5);
  const ids = ['ok', 'plain', '404', '429', '502', 'cancel', 'cancel-plain'].map((k) => `${run}-${k}`);
  const entries = await waitFor(async () => {
    const e = await streamEntries();
    return e.length >= ids.length ? e : null;
  }, 10_000, 50);
  await fault('8b-1', { mode: 'none' });
  await fault('8b-2', { mode: 'none' });

  // One entry per request, each `record <json>`, and nothing else in the stream.
  assert.equal(entries.length, ids.length, `entries: ${entries.map((e) => e.fields[1]).join('\n')}`);
  const records = new Map<string, UsageRecord>();
  for (const e of entries) {
    assert.match(e.id, /^\d+-\d+$/, 'server-assigned stream ids (XADD *)');
    assert.equal(e.fields.length, 2);
    assert.equal(e.fields[0], 'record');
    const rec = JSON.parse(e.fields[1]!) as UsageRecord;
    assert.deepEqual(Object.keys(rec).sort(), CONTRACT_FIELDS, 'exactly the contract fields');
    assert.ok(!records.has(rec.request_id), `one entry for ${rec.request_id}`);
    records.set(rec.request_id, rec);
    const ts = Date.parse(rec.ts);
    assert.ok(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/.test(rec.ts) && ts >= startedAt - 1000 && ts <= Date.now() + 1000, `ts ${rec.ts}`);
    assert.ok(typeof rec.duration_ms === 'number' && rec.duration_ms >= 0);
    for (const k of ['input_tokens', 'output_tokens', 'cached_tokens', 'retries', 'status'] as const) assert.ok(Number.isInteger(rec[k]) && rec[k] >= 0, `${k} of ${rec.request_id}`);
  }
  assert.deepEqual([...records.keys()].sort(), [...ids].sort(), 'no record for the bad key');

  const get = (k: string): UsageRecord => records.get(`${run}-${k}`)!;
  const replicas = ['8b-1', '8b-2'];

  const okRec = get('ok');
  assert.equal(okRec.tenant, 'alpha');
  assert.equal(okRec.model, 'gpt-fast', 'the model as requested');
  assert.equal(okRec.pool, '8b');
  assert.equal(okRec.adapter, null);
  assert.ok(replicas.includes(okRec.replica!));
  assert.equal(okRec.status, 200);
  assert.equal(okRec.finish_reason, 'length');
  assert.equal(okRec.output_tokens, 5);
  assert.ok(okRec.input_tokens > 5);
  assert.ok(okRec.ttft_ms !== null && okRec.ttft_ms >= 0 && okRec.ttft_ms <= okRec.duration_ms);
  assert.equal(okRec.retries, 0);
  assert.equal(okRec.cancelled, false);

  const plainRec = get('plain');
  assert.equal(plainRec.model, 'llama-3.1-8b-instruct');
  assert.equal(plainRec.status, 200);
  assert.equal(plainRec.output_tokens, 3);
  assert.equal(plainRec.finish_reason, 'length');
  assert.equal(plainRec.input_tokens, okRec.input_tokens, 'same prompt, same count');

  const nf = get('404');
  assert.deepEqual([nf.status, nf.model, nf.pool, nf.replica, nf.output_tokens, nf.ttft_ms, nf.cancelled], [404, 'no-such-model', null, null, 0, null, false]);

  const rl = get('429');
  assert.deepEqual([rl.status, rl.tenant, rl.pool, rl.replica, rl.output_tokens, rl.ttft_ms, rl.retries], [429, 'tiny', '8b', null, 0, null, 0]);

  const up = get('502');
  assert.equal(up.status, 502);
  assert.equal(up.retries, 1, 'both replicas tried');
  assert.ok(replicas.includes(up.replica!));
  assert.deepEqual([up.output_tokens, up.ttft_ms, up.finish_reason, up.cancelled], [0, null, null, false]);

  const c = get('cancel');
  assert.equal(c.status, 499);
  assert.equal(c.cancelled, true);
  assert.ok(c.ttft_ms !== null, 'the cancelled stream had its first token');
  assert.ok(c.output_tokens >= 2 && c.output_tokens < 200, `output tokens counted from what was relayed: ${c.output_tokens}`);

  const cp = get('cancel-plain');
  assert.deepEqual([cp.status, cp.cancelled, cp.ttft_ms, cp.output_tokens, cp.finish_reason], [499, true, null, 0, null], 'nothing was sent to the client');
  assert.ok(replicas.includes(cp.replica!));
});
