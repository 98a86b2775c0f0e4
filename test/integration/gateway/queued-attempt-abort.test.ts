// A request whose replica already has connections_per_replica of this gateway's requests in flight waits in
// the admission queue, never in the upstream client's socket queue (where its first-token timer would run
// with no byte sent and end as a replica timeout): a client hanging up there is settled at once, and a
// request still waiting at its deadline gets 429 server_overloaded with Retry-After, not 504.
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
    // The slow fault paces tokens 25 ms apart, which the GPU-time model can learn (with a loaded machine's lag)
    // as the replica's decode step: past 0.6 × the default 50 ms TPOT target, a request would be shed at arrival
    // as one the batch cannot serve, before any connection wait. This file is about that wait, so the target is
    // out of reach. (A loaded CI run once saw the second test's first stream end at once with no frame.)
    pools: [{ id: '8b', model: 'llama-3.1-8b-instruct', aliases: ['gpt-fast'], replicas: [{ profile: 'tiny' }], engine: { tpot_target_ms: 1000 } }],
    // One connection per replica: a second request waits in the admission queue, for the standard tier's 2 s
    // queue allowance (its TTFT budget raised to match: the default 400 ms would leave no time to wait).
    config: {
      upstream: { connect_timeout_ms: 1000, first_token_timeout_ms: FIRST_TOKEN_TIMEOUT_MS, max_attempts: 1, connections_per_replica: 1 },
      admission: { ttft_ms_by_tier: { standard: 10_000 } },
    },
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

async function queueDepth(): Promise<number> {
  const m = /^gateway_admission_queue_depth\{pool="8b"\} (\d+)$/m.exec(await (await fetch(`${stack.url}/metrics`)).text());
  return m === null ? 0 : Number(m[1]);
}

test('a client hanging up while its request waits for a connection is settled at once', async () => {
  const busy = await occupy('occupy-1');
  try {
    const id = 'queued-cancel';
    const q = openStream(stack.url, '/v1/chat/completions', { model: 'gpt-fast', messages: [{ role: 'user', content: 'wait' }], max_tokens: 5, stream: true }, { ...auth, 'x-request-id': id });
    await waitFor(async () => (await queueDepth()) === 1, 2000, 5);
    assert.equal(stack.gateway.registry.ledger.get(stack.gateway.registry.slotOf('8b-1'), LEDGER_INFLIGHT), 1, 'nothing sent past the cap');
    const t0 = performance.now();
    q.destroy();
    // Settlement (usage record, lease) must not wait for the other stream to finish (~10 s).
    const rec = await waitFor(async () => (await stack.usage()).find((r) => r.request_id === id), 3000, 20)
      .catch(() => null);
    const waited = performance.now() - t0;
    assert.ok(rec !== null, `no usage record ${waited.toFixed(0)} ms after the client left`);
    assert.equal(rec.status, 499);
    assert.equal(rec.cancelled, true);
    assert.equal(rec.replica, null);
    assert.equal(await queueDepth(), 0);
    assert.equal(stack.gateway.registry.ledger.get(stack.gateway.registry.slotOf('8b-1'), LEDGER_INFLIGHT), 1);
  } finally {
    busy.destroy();
    await waitFor(() => stack.gateway.inflightCount === 0, 15000, 20);
  }
});

test('a request still waiting for a connection at its deadline gets 429 server_overloaded, not 504', async () => {
  const busy = await occupy('occupy-2');
  try {
    const t0 = performance.now();
    const res = await fetch(`${stack.url}/v1/chat/completions`, {
      method: 'POST', headers: { ...auth, 'content-type': 'application/json', 'x-request-id': 'queued-timeout' },
      body: JSON.stringify({ model: 'gpt-fast', messages: [{ role: 'user', content: 'wait' }], max_tokens: 5, stream: true }),
    });
    const waited = performance.now() - t0;
    assert.equal(res.status, 429);
    assert.equal(((await res.json()) as { error: { code: string } }).error.code, 'server_overloaded');
    assert.match(res.headers.get('retry-after') ?? '', /^[1-9][0-9]*$/);
    // The standard tier waits at most 2 s; the busy stream holds the connection for ~10 s.
    assert.ok(waited < stack.cfg.admission.queue_ms_by_tier.standard + 1000, `answered after ${waited.toFixed(0)} ms`);
    const rec = await waitFor(async () => (await stack.usage()).find((r) => r.request_id === 'queued-timeout'));
    assert.equal(rec.retries, 0);
    assert.equal(rec.replica, null);
    assert.equal(stack.gateway.services.upstream.waitedForConnection, 0);
    assert.doesNotMatch(await (await fetch(`${stack.url}/metrics`)).text(), /gateway_upstream_errors_total\{kind="first_token_timeout"\} [1-9]/);
  } finally {
    busy.destroy();
    await waitFor(() => stack.gateway.inflightCount === 0, 15000, 20);
  }
});
