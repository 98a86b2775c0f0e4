// Every fault mode of POST /_mock/faults over real sockets, as the contract describes it, plus `count` and
// the rule that faults never touch /_mock/*.
import assert from 'node:assert/strict';
import { after, afterEach, before, test } from 'node:test';
import { startMockReplica, type MockReplica } from '../../helpers/mock-replicas.ts';
import { mockState, openStream, postJson, setFault, sleep } from './http-client.ts';

const CHAT = { messages: [{ role: 'user', content: 'hello' }], max_tokens: 8, ignore_eos: true };
let replica: MockReplica;
before(async () => {
  replica = await startMockReplica({ profile: 'tiny' });
});
afterEach(() => setFault(replica.url, { mode: 'none' }));
after(() => replica.close());

void test('error_before_first_token answers the configured status with a vLLM error body, then only count requests', async () => {
  await setFault(replica.url, { mode: 'error_before_first_token', status: 503, count: 2 });
  for (let i = 0; i < 2; i++) {
    const r = await postJson(replica.url, '/v1/chat/completions', { ...CHAT, stream: true });
    assert.equal(r.status, 503);
    const body = JSON.parse(r.text) as { error: { code: number; type: string; message: string } };
    assert.equal(body.error.code, 503);
  }
  const ok = await postJson(replica.url, '/v1/chat/completions', CHAT);
  assert.equal(ok.status, 200, 'count exhausted: back to normal');
});

void test('die_mid_stream cuts the socket after after_tokens content frames, with no [DONE], and aborts the engine request', async () => {
  await setFault(replica.url, { mode: 'die_mid_stream', after_tokens: 3 });
  const stream = openStream(replica.url, '/v1/chat/completions', { ...CHAT, max_tokens: 50, stream: true }, { 'x-request-id': 'dies' });
  const { outcome, text } = await stream.done;
  assert.equal(outcome, 'error', 'the body does not end cleanly');
  assert.ok(!text.includes('[DONE]'));
  const contentFrames = stream.frames().filter((f) => f.includes('"content":"') && !f.includes('"role"'));
  assert.equal(contentFrames.length, 3);
  await sleep(20);
  const s = await mockState(replica.url);
  assert.equal(s.requests.find((r) => r.id === 'dies')?.state, 'aborted');
});

void test('die_mid_stream on a stream shorter than after_tokens still dies before [DONE]', async () => {
  await setFault(replica.url, { mode: 'die_mid_stream', after_tokens: 10, count: 1 });
  const stream = openStream(replica.url, '/v1/completions', { prompt: 'x', max_tokens: 3, ignore_eos: true, stream: true });
  const { outcome, text } = await stream.done;
  assert.equal(outcome, 'error');
  assert.equal(stream.frames().length, 3);
  assert.ok(!text.includes('[DONE]'));
});

void test('die_mid_stream on a non-streamed request closes the socket without a response', async () => {
  await setFault(replica.url, { mode: 'die_mid_stream', after_tokens: 2, count: 1 });
  await assert.rejects(postJson(replica.url, '/v1/completions', { prompt: 'x', max_tokens: 20, ignore_eos: true }));
});

void test('hang accepts the request and never sends a byte', async () => {
  await setFault(replica.url, { mode: 'hang', count: 1 });
  const stream = openStream(replica.url, '/v1/chat/completions', { ...CHAT, stream: true });
  const raced = await Promise.race([stream.head.then(() => 'headers'), sleep(400).then(() => 'silence')]);
  assert.equal(raced, 'silence');
  stream.destroy();
  const after = await postJson(replica.url, '/v1/chat/completions', CHAT);
  assert.equal(after.status, 200, 'count 1: the next request is served');
});

void test('slow adds delay_ms between tokens', async () => {
  const t0 = performance.now();
  await postJson(replica.url, '/v1/chat/completions', { ...CHAT, max_tokens: 5, stream: true });
  const normalMs = performance.now() - t0;
  await setFault(replica.url, { mode: 'slow', delay_ms: 80 });
  // Timed from the send, not from the client's view of an early frame: a loaded machine delivers that frame
  // late, which shortened the rest below the four gaps' 320 ms though every gap was there.
  const tSend = performance.now();
  const stream = openStream(replica.url, '/v1/chat/completions', { ...CHAT, max_tokens: 5, stream: true });
  await stream.waitFrames(2);
  const { outcome, text } = await stream.done;
  const totalMs = performance.now() - tSend;
  assert.equal(outcome, 'end');
  assert.ok(text.endsWith('data: [DONE]\n\n'));
  assert.ok(totalMs >= 4 * 80, `5 tokens took ${totalMs.toFixed(0)} ms (unfaulted request: ${normalMs.toFixed(0)} ms)`);
});

void test('slow delays a non-streamed answer by delay_ms per token', async () => {
  await setFault(replica.url, { mode: 'slow', delay_ms: 60, count: 1 });
  const t0 = performance.now();
  const r = await postJson(replica.url, '/v1/completions', { prompt: 'x', max_tokens: 5, ignore_eos: true });
  assert.equal(r.status, 200);
  assert.ok(performance.now() - t0 >= 5 * 60 - 10, `answered after ${(performance.now() - t0).toFixed(0)} ms`);
});

void test('refuse_connections destroys /v1/* sockets without a reply while /health, /metrics and /_mock/* answer', async () => {
  await setFault(replica.url, { mode: 'refuse_connections' });
  await assert.rejects(postJson(replica.url, '/v1/chat/completions', CHAT));
  await assert.rejects(fetch(`${replica.url}/v1/models`));
  assert.equal((await fetch(`${replica.url}/health`)).status, 200);
  assert.equal((await fetch(`${replica.url}/metrics`)).status, 200);
  assert.equal((await fetch(`${replica.url}/_mock/state`)).status, 200);
  await setFault(replica.url, { mode: 'none' });
  assert.equal((await postJson(replica.url, '/v1/chat/completions', CHAT)).status, 200);
});

void test('unhealthy makes /health and /v1/* answer 503 until reset with none', async () => {
  await setFault(replica.url, { mode: 'unhealthy' });
  assert.equal((await fetch(`${replica.url}/health`)).status, 503);
  assert.equal((await fetch(`${replica.url}/v1/models`)).status, 503);
  assert.equal((await postJson(replica.url, '/v1/completions', { prompt: 'x', max_tokens: 2 })).status, 503);
  assert.equal((await fetch(`${replica.url}/_mock/state`)).status, 200, 'faults never apply to /_mock/*');
  await setFault(replica.url, { mode: 'none' });
  assert.equal((await fetch(`${replica.url}/health`)).status, 200);
});

void test('an invalid fault body is a 400 and leaves the current fault alone', async () => {
  const bad = await postJson(replica.url, '/_mock/faults', { mode: 'explode' });
  assert.equal(bad.status, 400);
  const current = (await (await fetch(`${replica.url}/_mock/faults`)).json()) as { mode: string };
  assert.equal(current.mode, 'none');
});
