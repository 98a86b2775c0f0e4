// An upstream attempt not yet written to a socket (queued in the replica's pool because every connection is
// busy, or still connecting) settles at once when it is aborted, by the client hanging up or by the
// first-token timeout. Settling it only when a connection frees up (here, when another request's whole stream
// ends) would hold the quota lease, the ledger entry and the client's 504 that long.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { ALPHA_KEY, startStack, waitFor, type TestStack } from '../../helpers/start-gateway.ts';
import { openStream, setFault } from '../mock-replica/http-client.ts';
import { LEDGER_INFLIGHT } from '../../../src/registry/inflight-ledger.ts';

let stack: TestStack;
const auth = { authorization: `Bearer ${ALPHA_KEY}` };
const FIRST_TOKEN_TIMEOUT_MS = 1500;

before(async () => {
  stack = await startStack({
    pools: [{ id: '8b', model: 'llama-3.1-8b-instruct', aliases: ['gpt-fast'], replicas: [{ profile: 'tiny' }] }],
    // One keep-alive connection per replica: a second request waits in undici's Pool queue.
    config: { upstream: { connect_timeout_ms: 1000, first_token_timeout_ms: FIRST_TOKEN_TIMEOUT_MS, max_attempts: 1, connections_per_replica: 1 } },
  });
  await setFault(stack.replicas.get('8b-1')!.url, { mode: 'slow', delay_ms: 25 });
});

after(async () => {
  await stack.close();
});

/** A long stream that holds the replica's only connection for ~10 s. */
async function occupy(id: string): Promise<ReturnType<typeof openStream>> {
  const s = openStream(stack.url, '/v1/chat/completions', { model: 'gpt-fast', messages: [{ role: 'user', content: 'occupy' }], max_tokens: 400, stream: true, ignore_eos: true }, { ...auth, 'x-request-id': id });
  await s.waitFrames(2);
  return s;
}

test('a client hanging up while its attempt is queued for a connection is settled at once', async () => {
  const busy = await occupy('occupy-1');
  try {
    const id = 'queued-cancel';
    const q = openStream(stack.url, '/v1/chat/completions', { model: 'gpt-fast', messages: [{ role: 'user', content: 'wait' }], max_tokens: 5, stream: true }, { ...auth, 'x-request-id': id });
    // Let it reach the upstream stage (queued in the Pool: the replica never sees it).
    await waitFor(() => stack.gateway.inflightCount === 2 && stack.gateway.registry.ledger.get(stack.gateway.registry.slotOf('8b-1'), LEDGER_INFLIGHT) === 2, 2000, 5);
    const t0 = performance.now();
    q.destroy();
    // Settlement (usage record, lease, ledger) must not wait for the other stream to finish (~10 s).
    const rec = await waitFor(async () => (await stack.usage()).find((r) => r.request_id === id), 3000, 20)
      .catch(() => null);
    const waited = performance.now() - t0;
    assert.ok(rec !== null, `no usage record ${waited.toFixed(0)} ms after the client left: the queued attempt was never settled`);
    assert.equal(rec.status, 499);
    assert.equal(rec.cancelled, true);
    assert.equal(stack.gateway.registry.ledger.get(stack.gateway.registry.slotOf('8b-1'), LEDGER_INFLIGHT), 1);
  } finally {
    busy.destroy();
    await waitFor(() => stack.gateway.inflightCount === 0, 15000, 20);
  }
});

test('the first-token timeout fires for an attempt still queued for a connection (504 in time)', async () => {
  const busy = await occupy('occupy-2');
  try {
    const t0 = performance.now();
    const res = await Promise.race([
      fetch(`${stack.url}/v1/chat/completions`, {
        method: 'POST', headers: { ...auth, 'content-type': 'application/json', 'x-request-id': 'queued-timeout' },
        body: JSON.stringify({ model: 'gpt-fast', messages: [{ role: 'user', content: 'wait' }], max_tokens: 5, stream: true }),
      }),
      new Promise<null>((r) => setTimeout(() => r(null), FIRST_TOKEN_TIMEOUT_MS + 2500)),
    ]);
    const waited = performance.now() - t0;
    assert.ok(res !== null, `no answer ${waited.toFixed(0)} ms after dispatch, first_token_timeout_ms is ${FIRST_TOKEN_TIMEOUT_MS}`);
    assert.equal(res.status, 504);
    assert.equal(((await res.json()) as { error: { code: string } }).error.code, 'upstream_timeout');
  } finally {
    busy.destroy();
    await waitFor(() => stack.gateway.inflightCount === 0, 15000, 20);
  }
});
