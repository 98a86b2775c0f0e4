// A client that hangs up aborts the engine's work at once, whether its request was streaming or still
// queued on the replica, and everything the gateway holds for it (quota lease, ledger) is released.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { ALPHA_KEY, TINY_KEY, startStack, waitFor, type TestStack } from '../../helpers/start-gateway.ts';
import { openStream } from '../mock-replica/http-client.ts';
import { LEDGER_INFLIGHT, LEDGER_OUTSTANDING_TOKENS } from '../../../src/registry/inflight-ledger.ts';

let stack: TestStack;
const auth = { authorization: `Bearer ${ALPHA_KEY}` };

interface MockState { requests: Array<{ id: string; state: string; output_tokens: number }>; aborted: number; running: number; waiting: number; free_blocks: number; total_blocks: number; cached_blocks: number }

async function state(): Promise<MockState> {
  return await (await fetch(`${stack.replicas.get('8b-1')!.url}/_mock/state`)).json() as MockState;
}

/** The replica's engine state read directly (the mock runs in this process), so polling adds no HTTP hop. */
function phaseOf(id: string): string | undefined {
  return stack.replicas.get('8b-1')!.engine.snapshot().requests.find((r) => r.id === id)?.state;
}

before(async () => {
  // One replica that runs one sequence at a time, so a second request queues on the replica.
  stack = await startStack({
    pools: [{ id: '8b', model: 'llama-3.1-8b-instruct', aliases: ['gpt-fast'], replicas: [{ profile: 'tiny', maxNumSeqs: 1 }] }],
  });
  await fetch(`${stack.replicas.get('8b-1')!.url}/_mock/faults`, { method: 'POST', body: JSON.stringify({ mode: 'slow', delay_ms: 20 }) });
});

after(async () => {
  await stack.close();
});

// How fast the abort reaches the replica is a product figure measured by `npm run bench -- cancel`; these tests
// assert what happens, with deadlines far above it.
test('a client hanging up mid-stream aborts the replica request and releases what the gateway held', async () => {
  const id = 'cancel-stream';
  const s = openStream(stack.url, '/v1/chat/completions', { model: 'gpt-fast', messages: [{ role: 'user', content: 'long story' }], max_tokens: 500, stream: true, ignore_eos: true }, { ...auth, 'x-request-id': id });
  await s.waitFrames(4);
  assert.equal(phaseOf(id), 'running');
  s.destroy();
  await waitFor(() => phaseOf(id) === 'aborted', 10_000);
  const rec = await waitFor(async () => (await stack.usage()).find((r) => r.request_id === id), 10_000);
  assert.equal(rec.cancelled, true);
  assert.equal(rec.status, 499);
  assert.ok(rec.output_tokens >= 3 && rec.output_tokens < 500, `output tokens counted from what was relayed: ${rec.output_tokens}`);
  const slot = stack.gateway.registry.slotOf('8b-1');
  await waitFor(() => stack.gateway.registry.ledger.get(slot, LEDGER_INFLIGHT) === 0, 10_000);
  assert.equal(stack.gateway.registry.ledger.get(slot, LEDGER_OUTSTANDING_TOKENS), 0);
});

test('a client hanging up while its request is queued on the replica aborts it there too', async () => {
  const id = 'cancel-queued';
  const busy = openStream(stack.url, '/v1/chat/completions', { model: 'gpt-fast', messages: [{ role: 'user', content: 'occupy' }], max_tokens: 300, stream: true, ignore_eos: true }, { ...auth, 'x-request-id': 'busy' });
  await busy.waitFrames(2);
  const queued = openStream(stack.url, '/v1/chat/completions', { model: 'gpt-fast', messages: [{ role: 'user', content: 'wait' }], max_tokens: 5, stream: true }, { ...auth, 'x-request-id': id });
  await waitFor(() => phaseOf(id) === 'waiting', 10_000);
  queued.destroy();
  await waitFor(() => phaseOf(id) === 'aborted', 10_000);
  assert.equal(phaseOf('busy'), 'running', 'the running request was not touched');
  const rec = await waitFor(async () => (await stack.usage()).find((r) => r.request_id === id), 10_000);
  assert.equal(rec.cancelled, true);
  assert.equal(rec.output_tokens, 0);
  assert.equal(rec.ttft_ms, null);
  busy.destroy();
  await waitFor(async () => (await state()).running === 0, 10_000);
  const st = await state();
  assert.equal(st.running + st.waiting, 0);
});

test('cancelled requests release their concurrency lease: the tenant can use its full in-flight limit again', async () => {
  // tenant tiny: 2 requests in flight
  for (let i = 0; i < 3; i++) {
    const s = openStream(stack.url, '/v1/chat/completions', { model: 'gpt-fast', messages: [{ role: 'user', content: 'x' }], max_tokens: 50, stream: true, ignore_eos: true }, { authorization: `Bearer ${TINY_KEY}`, 'x-request-id': `tiny-cancel-${i}` });
    await s.waitFrames(1);
    s.destroy();
    await waitFor(async () => (await stack.usage()).some((r) => r.request_id === `tiny-cancel-${i}`), 10_000);
  }
  // Two concurrent requests fit (a leaked lease would refuse b); a third is refused with 429 concurrency_limit_exceeded.
  const a = openStream(stack.url, '/v1/chat/completions', { model: 'gpt-fast', messages: [{ role: 'user', content: 'a' }], max_tokens: 40, stream: true, ignore_eos: true }, { authorization: `Bearer ${TINY_KEY}`, 'x-request-id': 'tiny-a' });
  assert.equal((await a.head).statusCode, 200);
  const b = openStream(stack.url, '/v1/chat/completions', { model: 'gpt-fast', messages: [{ role: 'user', content: 'b' }], max_tokens: 40, stream: true, ignore_eos: true }, { authorization: `Bearer ${TINY_KEY}`, 'x-request-id': 'tiny-b' });
  // b holds its lease once it queues on the replica behind a; a refusal would answer b before that
  let bAnswered: number | null = null;
  void b.head.then((h) => { bAnswered = h.statusCode ?? 0; }, () => { bAnswered = -1; });
  await waitFor(() => phaseOf('tiny-b') === 'waiting' || bAnswered !== null, 10_000);
  assert.equal(bAnswered, null, `b was answered ${String(bAnswered)} instead of queuing`);
  const c = await fetch(`${stack.url}/v1/chat/completions`, {
    method: 'POST', headers: { authorization: `Bearer ${TINY_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt-fast', messages: [{ role: 'user', content: 'c' }], max_tokens: 5 }),
  });
  assert.equal(c.status, 429);
  assert.equal(((await c.json()) as { error: { code: string } }).error.code, 'concurrency_limit_exceeded');
  assert.ok(Number(c.headers.get('retry-after')) >= 1);
  a.destroy();
  assert.equal((await b.head).statusCode, 200, 'b runs once a is gone');
  b.destroy();
});
