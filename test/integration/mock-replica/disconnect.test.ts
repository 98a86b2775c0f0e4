// Client disconnects over real sockets: the engine request is aborted at once and its KV blocks freed,
// streamed or not; stream headers leave before prefill, the first frame only at first-token time.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startMockReplica, type MockReplica } from '../../helpers/mock-replicas.ts';
import { mockState, openStream, sleep, type MockState } from './http-client.ts';

const MESSAGES = [{ role: 'user', content: 'Write a very long story.' }];
let replica: MockReplica;
before(async () => {
  // 8B steps (~10 ms of decode) keep this process mostly idle, so the polls below measure the abort, not a busy loop.
  replica = await startMockReplica({ profile: 'llama-8b-a100' });
});
after(() => replica.close());

/** Polls /_mock/state until `id` shows `state`; returns the state and the elapsed milliseconds. */
async function waitForState(id: string, state: string, limitMs: number): Promise<{ s: MockState; elapsedMs: number }> {
  const t0 = performance.now();
  for (;;) {
    const s = await mockState(replica.url);
    if (s.requests.find((r) => r.id === id)?.state === state) return { s, elapsedMs: performance.now() - t0 };
    if (performance.now() - t0 > limitMs) assert.fail(`request ${id} not ${state} after ${limitMs} ms: ${JSON.stringify(s.requests.find((r) => r.id === id))}`);
    await sleep(2);
  }
}

// "At once" is asserted as aborted long before the generation could end (1,800 tokens, ~18 s of 8B decode);
// how fast the abort lands is a figure for native-bench (`npm run bench -- cancel`), not a bound here.
void test('a client that disconnects mid-stream shows up as aborted with its blocks freed', async (t) => {
  const id = 'gone-stream';
  const prev = await mockState(replica.url);
  const stream = openStream(replica.url, '/v1/chat/completions', { messages: MESSAGES, max_tokens: 1800, ignore_eos: true, stream: true }, { 'x-request-id': id });
  await stream.waitFrames(6);
  const mid = await mockState(replica.url);
  assert.equal(mid.running, 1);
  assert.ok(mid.free_blocks < mid.total_blocks - 1, 'the running request holds blocks');
  stream.destroy();
  const { s, elapsedMs } = await waitForState(id, 'aborted', 10_000);
  t.diagnostic(`aborted ${elapsedMs.toFixed(1)} ms after the disconnect`);
  assert.equal(s.running, 0);
  assert.equal(s.free_blocks, s.total_blocks - 1, 'every block is unreferenced again');
  assert.equal(s.aborted, prev.aborted + 1);
  const row = s.requests.find((r) => r.id === id)!;
  assert.ok(row.output_tokens >= 5 && row.output_tokens < 1800, `aborted after ${row.output_tokens} of 1800 tokens`);
});

void test('a client that disconnects from a non-streamed request aborts it too', async () => {
  const call = openStream(replica.url, '/v1/completions', { prompt: 'Tell me everything.', max_tokens: 1800, ignore_eos: true }, { 'x-request-id': 'gone-json' });
  // Nothing is sent before the end of a non-streamed request: wait until the engine is generating.
  for (let i = 0; i < 200; i++) {
    const s = await mockState(replica.url);
    if ((s.requests.find((r) => r.id === 'gone-json')?.output_tokens ?? 0) > 3) break;
    await sleep(5);
  }
  call.destroy();
  const { s } = await waitForState('gone-json', 'aborted', 10_000);
  assert.equal(s.free_blocks, s.total_blocks - 1);
});

void test('stream headers arrive before prefill ends and the first frame only at first-token time', async () => {
  const slow = await startMockReplica({ profile: 'llama-70b-tp2-a100' });
  try {
    const t0 = performance.now();
    const prompt = 'alpha beta gamma delta '.repeat(500); // ≈2,000 tokens: ≈0.9 s of 70B prefill
    const stream = openStream(slow.url, '/v1/completions', { prompt, max_tokens: 2, stream: true });
    const head = await stream.head;
    const headMs = performance.now() - t0;
    assert.equal(head.statusCode, 200);
    assert.equal(head.headers['content-type'], 'text/event-stream; charset=utf-8');
    assert.equal(stream.text(), '', 'no byte of body before the first token');
    await stream.waitFrames(1);
    const firstFrameMs = performance.now() - t0;
    assert.ok(firstFrameMs - headMs > 400, `headers at ${headMs.toFixed(0)} ms, first frame at ${firstFrameMs.toFixed(0)} ms`);
    const { outcome, text } = await stream.done;
    assert.equal(outcome, 'end');
    assert.ok(text.endsWith('data: [DONE]\n\n'));
  } finally {
    await slow.close();
  }
});
