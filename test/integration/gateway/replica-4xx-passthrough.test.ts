// A replica's own 4xx (vLLM's 400 for an out-of-vocabulary token id) is the client's problem: passed
// through with the replica's status in the gateway envelope (code a string), never retried on another
// replica, streaming or not, nothing charged, and the concurrency lease given back each time.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { TINY_KEY, startStack, type TestStack } from '../../helpers/start-gateway.ts';
import { startMockReplica, type MockReplica } from '../../helpers/mock-replicas.ts';
import { startCountingProxy, type CountingProxy } from '../../helpers/counting-proxy.ts';

let stack: TestStack;
const mocks: MockReplica[] = [];
const proxies: CountingProxy[] = [];

before(async () => {
  // Each replica behind a counting proxy: the mock refuses the request before its engine sees it.
  for (let i = 0; i < 2; i++) {
    const m = await startMockReplica({ profile: 'tiny', model: 'llama-3.1-8b-instruct' });
    mocks.push(m);
    proxies.push(await startCountingProxy(m.url));
  }
  stack = await startStack({
    pools: [{ id: '8b', model: 'llama-3.1-8b-instruct', aliases: ['gpt-fast'], replicas: [] }],
    externalReplicas: { '8b': proxies.map((p) => p.url) },
  });
});

after(async () => {
  await stack.close();
  await Promise.all([...proxies, ...mocks].map((x) => x.close()));
});

async function post(body: unknown, id: string): Promise<Response> {
  return fetch(`${stack.url}/v1/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TINY_KEY}`, 'content-type': 'application/json', 'x-request-id': id },
    body: JSON.stringify(body),
  });
}

test('a replica 400 is passed through once, streaming or not, and releases the lease', async () => {
  // tenant tiny: 2 in flight; four sequential refusals would exhaust it if a lease leaked.
  for (let i = 0; i < 4; i++) {
    const id = `oov-${i}`;
    const stream = i % 2 === 1;
    const res = await post({ model: 'gpt-fast', prompt: [1, 2, 999_999], max_tokens: 4, stream }, id);
    assert.equal(res.status, 400);
    assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
    assert.equal(res.headers.get('x-request-id'), id);
    const body = (await res.json()) as { error: { code: unknown; type: string; message: string } };
    assert.equal(typeof body.error.code, 'string');
    assert.equal(body.error.type, 'invalid_request_error');
    assert.match(body.error.message, /out of vocabulary/);
    const sent = proxies.map((p) => p.count('/v1/completions', id));
    assert.equal(sent[0]! + sent[1]!, 1, `forwarded ${sent.join(' + ')} times`);
  }
  const recs = (await stack.usage()).filter((r) => r.request_id.startsWith('oov-'));
  assert.equal(recs.length, 4);
  for (const r of recs) {
    assert.equal(r.status, 400);
    assert.equal(r.retries, 0);
    assert.equal(r.output_tokens, 0);
    assert.equal(r.cancelled, false);
  }
  // The leases and the reservations came back: two concurrent requests are admitted.
  const ok = await Promise.all([0, 1].map((i) => post({ model: 'gpt-fast', prompt: 'hello', max_tokens: 4 }, `after-oov-${i}`)));
  assert.deepEqual(ok.map((r) => r.status), [200, 200]);
});
