// Failures before the first byte are retried on another replica; after it, the stream ends with one error
// event. Real gateway, real mock replicas with faults injected through POST /_mock/faults.
import { test, before, after, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { OpenAI } from '../clients/openai-sdk.ts';
import { ALPHA_KEY, startStack, type TestStack } from '../../helpers/start-gateway.ts';
import { openStream } from '../mock-replica/http-client.ts';

let stack: TestStack;
let client: OpenAI;
const auth = { authorization: `Bearer ${ALPHA_KEY}` };

async function fault(replica: string, spec: Record<string, unknown>): Promise<void> {
  const res = await fetch(`${stack.replicas.get(replica)!.url}/_mock/faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(spec) });
  assert.equal(res.status, 200);
}

before(async () => {
  stack = await startStack({
    config: {
      routing: { policy: 'round-robin' },
      upstream: { connect_timeout_ms: 1000, first_token_timeout_ms: 400, max_attempts: 3 },
      // data-plane failures alone must not take replicas out for these tests' duration
      registry: { scrape_interval_ms: 50, scrape_timeout_ms: 2000, down_after_failures: 50 },
    },
  });
  client = new OpenAI({ apiKey: ALPHA_KEY, baseURL: `${stack.url}/v1`, maxRetries: 0 });
});

beforeEach(async () => {
  await fault('8b-1', { mode: 'none' });
  await fault('8b-2', { mode: 'none' });
});

after(async () => {
  await stack.close();
});

test('a replica failing before the first token is retried on another and the client succeeds', async () => {
  await fault('8b-1', { mode: 'error_before_first_token', status: 500 });
  for (let i = 0; i < 4; i++) {
    const stream = await client.chat.completions.create({ model: 'gpt-fast', messages: [{ role: 'user', content: `retry ${i}` }], max_tokens: 3, stream: true }, { headers: { 'x-request-id': `efb-${i}` } });
    let n = 0;
    for await (const c of stream) if (c.choices[0]?.delta.content) n++;
    assert.equal(n, 3);
  }
  const recs = (await stack.usage()).filter((r) => r.request_id.startsWith('efb-'));
  assert.equal(recs.length, 4);
  assert.ok(recs.every((r) => r.status === 200 && r.replica === '8b-2'));
  assert.ok(recs.some((r) => r.retries === 1), 'round robin sent some first attempts to the faulty replica');
});

test('refused connections are retried on another replica', async () => {
  await fault('8b-1', { mode: 'refuse_connections' });
  for (let i = 0; i < 3; i++) {
    const res = await client.chat.completions.create({ model: 'gpt-fast', messages: [{ role: 'user', content: `refuse ${i}` }], max_tokens: 2 }, { headers: { 'x-request-id': `ref-${i}` } });
    assert.equal(res.usage?.completion_tokens, 2);
  }
  const recs = (await stack.usage()).filter((r) => r.request_id.startsWith('ref-'));
  assert.ok(recs.every((r) => r.status === 200 && r.replica === '8b-2'));
});

test('a replica dying mid-stream ends the stream with one error event and no [DONE]', async () => {
  await fault('8b-1', { mode: 'die_mid_stream', after_tokens: 3 });
  await fault('8b-2', { mode: 'die_mid_stream', after_tokens: 3 });
  const s = openStream(stack.url, '/v1/chat/completions', { model: 'gpt-fast', messages: [{ role: 'user', content: 'die' }], max_tokens: 20, stream: true }, { ...auth, 'x-request-id': 'die-1' });
  const head = await s.head;
  assert.equal(head.statusCode, 200);
  const { text } = await s.done;
  const frames = text.split('\n\n').filter(Boolean);
  const errors = frames.filter((f) => f.startsWith('data: {"error"'));
  assert.equal(errors.length, 1, text);
  assert.equal(frames.at(-1), errors[0], 'the error event is the last one');
  assert.ok(!text.includes('[DONE]'));
  const err = JSON.parse(errors[0]!.slice(6)) as { error: { code: string; type: string } };
  assert.equal(err.error.code, 'upstream_error');
  const rec = (await stack.usage()).find((r) => r.request_id === 'die-1')!;
  assert.equal(rec.retries, 0, 'never retried after the first byte');
  assert.equal(rec.output_tokens, 3, 'output tokens counted from what was relayed');
  assert.equal(rec.cancelled, false);
});

test('a hanging replica hits the first-token timeout and the request is retried', async () => {
  await fault('8b-1', { mode: 'hang' });
  for (let i = 0; i < 2; i++) {
    const stream = await client.chat.completions.create({ model: 'gpt-fast', messages: [{ role: 'user', content: `hang ${i}` }], max_tokens: 2, stream: true }, { headers: { 'x-request-id': `hang-${i}` } });
    for await (const _ of stream) void _;
  }
  const recs = (await stack.usage()).filter((r) => r.request_id.startsWith('hang-'));
  const retried = recs.find((r) => r.retries === 1);
  assert.ok(retried, 'one of two round-robin streams went to the hanging replica first');
  assert.equal(retried.replica, '8b-2');
  assert.equal(retried.status, 200);
  assert.ok(retried.ttft_ms! >= 400, `ttft ${retried.ttft_ms} includes the 400 ms first-token timeout`);
});

test('every replica failing before the first byte is a 502 with the usage record of the attempts', async () => {
  await fault('8b-1', { mode: 'error_before_first_token', status: 503 });
  await fault('8b-2', { mode: 'error_before_first_token', status: 503 });
  const res = await fetch(`${stack.url}/v1/chat/completions`, {
    method: 'POST', headers: { ...auth, 'content-type': 'application/json', 'x-request-id': 'all-down' },
    body: JSON.stringify({ model: 'gpt-fast', messages: [{ role: 'user', content: 'x' }], max_tokens: 2, stream: true }),
  });
  assert.equal(res.status, 502);
  const body = await res.json() as { error: { code: string } };
  assert.equal(body.error.code, 'upstream_error');
  const rec = (await stack.usage()).find((r) => r.request_id === 'all-down')!;
  assert.equal(rec.status, 502);
  assert.equal(rec.retries, 1, 'two replicas, two attempts');
  assert.equal(rec.output_tokens, 0);
});
