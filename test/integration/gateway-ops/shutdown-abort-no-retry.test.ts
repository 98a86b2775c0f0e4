// When the shutdown grace period runs out, GatewayServer.shutdown() aborts the upstream call of every request
// still in flight without marking the request cancelled. Such a request is not dispatched again: a retry would
// reach another replica after the deadline, on a gateway that is stopping (and, once upstream.close() has
// destroyed the pools, open new ones that nobody closes).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { ALPHA_KEY, startStack, waitFor, type TestStack } from '../../helpers/start-gateway.ts';
import { mockState, setFault } from '../mock-replica/http-client.ts';

let stack: TestStack | null = null;

after(async () => {
  await stack?.close();
});

test('a request aborted at the end of the shutdown grace period is not retried on another replica', async () => {
  stack = await startStack();
  const urls = [stack.replicas.get('8b-1')!.url, stack.replicas.get('8b-2')!.url];
  for (const u of urls) await setFault(u, { mode: 'slow', delay_ms: 50 });
  const id = 'shutdown-abort-1';
  // Non-streaming, ~10 s of generation: still running when the 300 ms grace period ends.
  const pending = fetch(`${stack.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ALPHA_KEY}`, 'content-type': 'application/json', 'x-request-id': id },
    body: JSON.stringify({ model: 'gpt-fast', messages: [{ role: 'user', content: 'long' }], max_tokens: 200, ignore_eos: true }),
  }).then(async (r) => ({ status: r.status, body: await r.text() }), (e: Error) => ({ status: 0, body: e.message }));
  const seen = async (): Promise<number> => {
    let n = 0;
    for (const u of urls) if ((await mockState(u)).requests.some((r) => r.id === id || r.id.startsWith(`${id}-`))) n++;
    return n;
  };
  await waitFor(async () => (await seen()) === 1, 3000, 10);
  await stack.gateway.close(300);
  const res = await pending;
  const replicasThatSawIt = await seen();
  const rec = (await stack.usage()).find((r) => r.request_id === id);
  assert.equal(replicasThatSawIt, 1, `the request was dispatched to ${replicasThatSawIt} replicas; client got ${res.status} ${res.body}`);
  assert.notEqual(res.status, 200);
  // settled once, before the gateway finished closing: one usage record, with no retry and not marked cancelled
  assert.ok(rec !== undefined, 'the aborted request left a usage record');
  assert.equal(rec.retries, 0);
  assert.equal(rec.cancelled, false);
  assert.notEqual(rec.status, 200);
});
