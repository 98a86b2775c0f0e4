// A client that hangs up while its large prompt is being tokenized (worker pool, abort signal) is
// settled as a cancel: usage record 499 with no replica, nothing sent upstream, nothing left in flight, and
// the tenant's concurrency lease comes back.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { TINY_KEY, startStack, waitFor, type TestStack } from '../../helpers/start-gateway.ts';
import { openStream, mockState } from '../mock-replica/http-client.ts';

let stack: TestStack;

before(async () => {
  stack = await startStack({
    pools: [{ id: '8b', model: 'llama-3.1-8b-instruct', aliases: ['gpt-fast'], maxContextTokens: 131072, replicas: [{ profile: 'tiny' }] }],
    config: { tokenizer: { threads: 1, inline_max_chars: 1024 } },
  });
});

after(async () => {
  await stack.close();
});

test('hanging up during a long tokenization is a 499 with nothing sent upstream and the lease released', async () => {
  for (let i = 0; i < 3; i++) {
    const id = `tok-cancel-${i}`;
    // ~3 MB of fresh text (no cache hits): hundreds of ms of tokenizer work on a worker thread.
    const words: string[] = [];
    for (let k = 0; k < 300_000; k++) words.push(randomBytes(4).toString('hex'));
    const s = openStream(stack.url, '/v1/completions', { model: 'gpt-fast', prompt: words.join(' '), max_tokens: 4, stream: true }, { authorization: `Bearer ${TINY_KEY}`, 'x-request-id': id });
    const tok = stack.gateway.services.tokenizer as unknown as { stats(): { pooled: number } };
    const before = tok.stats().pooled;
    // Hang up once the prompt is on the worker pool (the body is read, the tokenizer holds the signal).
    await waitFor(() => tok.stats().pooled > before, 5000, 1);
    s.destroy();
    const rec = await waitFor(async () => (await stack.usage()).find((r) => r.request_id === id), 10000, 20);
    assert.equal(rec.status, 499, JSON.stringify(rec));
    assert.equal(rec.cancelled, true);
    assert.equal(rec.replica, null);
    assert.equal(rec.ttft_ms, null);
    await waitFor(() => stack.gateway.inflightCount === 0, 3000, 10);
  }
  const st = await mockState(stack.replicas.get('8b-1')!.url);
  assert.ok(!st.requests.some((r) => r.id.startsWith('tok-cancel-')), 'a cancelled request reached the replica');
  // tenant tiny has 2 leases: both usable again.
  const ok = await Promise.all([0, 1].map(() => fetch(`${stack.url}/v1/completions`, {
    method: 'POST', headers: { authorization: `Bearer ${TINY_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt-fast', prompt: 'hi', max_tokens: 2 }),
  })));
  assert.deepEqual(ok.map((r) => r.status), [200, 200]);
});
