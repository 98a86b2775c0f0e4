// A client that hangs up while its request waits in the admission queue leaves the queue at once, the replica
// never sees it, and its quota reservation comes back in full (the tenant's bucket barely refills here, so
// the next request's x-ratelimit-remaining-tokens shows exactly what is still reserved).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { startStack, waitFor, type TestStack } from '../../helpers/start-gateway.ts';
import { mockState, openStream, setFault } from '../mock-replica/http-client.ts';

let stack: TestStack;
const KEY = 'sk-test-meter';
const BURST = 100_000;
const auth = { authorization: `Bearer ${KEY}` };

before(async () => {
  stack = await startStack({
    pools: [
      { id: '8b', model: 'llama-3.1-8b-instruct', replicas: [{ profile: 'tiny' }] },
      { id: 'side', model: 'side-model', replicas: [{ profile: 'tiny' }] },
    ],
    config: {
      upstream: { connect_timeout_ms: 1000, first_token_timeout_ms: 5000, max_attempts: 1, connections_per_replica: 1 },
      tenants: [{
        name: 'meter', api_keys: [{ sha256: createHash('sha256').update(KEY).digest('hex') }],
        tokens_per_second: 0.001, burst_tokens: BURST, max_inflight: 16, sla_tier: 'batch',
      }],
    },
  });
  await setFault(stack.replicas.get('8b-1')!.url, { mode: 'slow', delay_ms: 20 });
});

after(async () => {
  await stack.close();
});

async function queueDepth(pool: string): Promise<number> {
  const text = await (await fetch(`${stack.url}/metrics`)).text();
  const m = new RegExp(`^gateway_admission_queue_depth\\{pool="${pool}"\\} (\\d+)$`, 'm').exec(text);
  return m === null ? 0 : Number(m[1]);
}

test('a client hanging up while queued leaves the admission queue at once and its quota is refunded in full', async () => {
  // Holds the replica's only connection for ~8 s.
  const busy = openStream(stack.url, '/v1/chat/completions', { model: 'llama-3.1-8b-instruct', messages: [{ role: 'user', content: 'occupy' }], max_tokens: 400, stream: true, ignore_eos: true }, { ...auth, 'x-request-id': 'busy' });
  try {
    await busy.waitFrames(2);
    const q = openStream(stack.url, '/v1/chat/completions', { model: 'llama-3.1-8b-instruct', messages: [{ role: 'user', content: 'wait for me' }], max_tokens: 50, stream: true }, { ...auth, 'x-request-id': 'queued' });
    await waitFor(async () => (await queueDepth('8b')) === 1, 10_000, 10);
    q.destroy();
    const rec = await waitFor(async () => (await stack.usage()).find((r) => r.request_id === 'queued'), 10_000, 5);
    // "At once": settled while the request it queued behind still holds the replica, not when a slot freed.
    const busyNow = (await mockState(stack.replicas.get('8b-1')!.url)).requests.find((r) => r.id === 'busy');
    assert.equal(busyNow?.state, 'running', 'settled while the request ahead of it still runs');
    assert.equal((await stack.usage()).some((r) => r.request_id === 'busy'), false);
    assert.equal(await queueDepth('8b'), 0);
    assert.equal(rec.status, 499);
    assert.equal(rec.cancelled, true);
    assert.equal(rec.replica, null, 'it never reached a replica');
    assert.ok(rec.queue_ms > 0, `queue_ms ${rec.queue_ms}`);
    assert.equal(rec.retries, 0);
    const st = await mockState(stack.replicas.get('8b-1')!.url);
    assert.equal(st.requests.some((r) => r.id.includes('queued')), false, 'the replica never saw it');

    // Only `busy` (prompt + 400) and this probe (prompt + 1) are reserved now: the queued request's
    // reservation came back whole.
    const res = await fetch(`${stack.url}/v1/chat/completions`, {
      method: 'POST', headers: { ...auth, 'content-type': 'application/json', 'x-request-id': 'probe' },
      body: JSON.stringify({ model: 'side-model', messages: [{ role: 'user', content: 'probe' }], max_tokens: 1 }),
    });
    assert.equal(res.status, 200);
    await res.text();
    const remaining = Number(res.headers.get('x-ratelimit-remaining-tokens'));
    busy.destroy();
    const [busyRec, probeRec] = await waitFor(async () => {
      const recs = await stack.usage();
      const b = recs.find((r) => r.request_id === 'busy');
      const p = recs.find((r) => r.request_id === 'probe');
      return b !== undefined && p !== undefined ? [b, p] as const : null;
    }, 3000, 10);
    assert.equal(remaining, BURST - (busyRec.input_tokens + 400) - (probeRec.input_tokens + 1),
      `the queued request's ${rec.input_tokens + 50} tokens are still reserved`);
  } finally {
    busy.destroy();
    await waitFor(() => stack.gateway.inflightCount === 0, 10000, 20);
  }
});
