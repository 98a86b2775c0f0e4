// What a 429 tells a client about retrying, checked with the official `openai` SDK (which retries 429s unless
// told not to) against a real gateway and real mock replicas: a request that can never fit the tenant's burst
// says so with `x-should-retry: false` and no Retry-After, and the SDK gives up after one attempt; a 429 that
// waiting does cure keeps a truthful Retry-After and no such header.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { OpenAI } from '../clients/openai-sdk.ts';
import { DEFAULT_POOL, TINY_KEY, startStack, type TestStack } from '../../helpers/start-gateway.ts';
import { openStream, setFault } from '../mock-replica/http-client.ts';

// The `tiny` tenant: 100 tokens/s, a 4,000-token burst, 2 requests in flight. The `slow` one refills at
// 10 tokens/s, so the Retry-After of its retryable 429 is long enough to check against the arithmetic.
const SLOW_KEY = 'sk-test-slow';
const sha = (k: string): string => createHash('sha256').update(k).digest('hex');
let stack: TestStack;

before(async () => {
  // A context long enough that max_tokens 5,000 is refused by the quota, not by the context check.
  stack = await startStack({
    pools: [{ ...DEFAULT_POOL, maxContextTokens: 8192 }],
    config: {
      tenants: [
        { name: 'tiny', api_keys: [{ sha256: sha(TINY_KEY) }], tokens_per_second: 100, burst_tokens: 4000, max_inflight: 2 },
        { name: 'slow', api_keys: [{ sha256: sha(SLOW_KEY) }], tokens_per_second: 10, burst_tokens: 2000, max_inflight: 8 },
      ],
    },
  });
});

after(async () => {
  await stack.close();
});

test('a request larger than the burst is a 429 the openai SDK does not retry: x-should-retry false, no Retry-After, a message naming max_tokens', async () => {
  // Every request the SDK sends goes through this fetch: a retry would be a second call (after a sleep).
  let sent = 0;
  const counting: typeof fetch = (input, init) => {
    sent++;
    return fetch(input, init);
  };
  const client = new OpenAI({ apiKey: TINY_KEY, baseURL: `${stack.url}/v1`, maxRetries: 2, fetch: counting });
  const err = await client.chat.completions.create(
    { model: 'gpt-fast', messages: [{ role: 'user', content: 'hi' }], max_tokens: 5000 },
    { headers: { 'x-request-id': 'never-fits-1' } },
  ).then(() => null, (e: unknown) => e);
  assert.equal(sent, 1, 'the SDK gave up after one attempt: no retry, so no retry sleep');
  assert.ok(err instanceof OpenAI.RateLimitError, `got ${String(err)}`);
  assert.equal(err.headers.get('x-should-retry'), 'false');
  assert.equal(err.headers.get('retry-after'), null, 'no wait makes it fit, so none is promised');
  assert.equal((err.error as { code?: string }).code, 'rate_limit_exceeded');
  assert.match(err.message, /needs \d+ tokens .*burst of 4000.*max_tokens/);
  const attempts = (await stack.usage()).filter((r) => r.request_id === 'never-fits-1');
  assert.equal(attempts.length, 1, 'the SDK sent it once');
  assert.equal(attempts[0]!.status, 429);
});

test('a 429 that waiting cures keeps a truthful Retry-After and says nothing against retrying', async () => {
  for (const r of stack.replicas.values()) await setFault(r.url, { mode: 'slow', delay_ms: 100 });
  try {
    // Holds a reservation of prompt + 1,900 tokens while it streams, leaving the bucket about 2000 − 1900 − prompt.
    const holder = openStream(stack.url, '/v1/chat/completions',
      { model: 'gpt-fast', messages: [{ role: 'user', content: 'hold' }], max_tokens: 1900, stream: true },
      { authorization: `Bearer ${SLOW_KEY}`, 'x-request-id': 'holder' });
    await holder.waitFrames(1).catch(async () => assert.fail(`holder: ${(await holder.head).statusCode} ${holder.text()}`));
    const res = await fetch(`${stack.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${SLOW_KEY}`, 'content-type': 'application/json', 'x-request-id': 'retryable-429' },
      body: JSON.stringify({ model: 'gpt-fast', messages: [{ role: 'user', content: 'next' }], max_tokens: 100 }),
    });
    const body = (await res.json()) as { error: { code: string; message: string } };
    assert.equal(res.status, 429);
    assert.equal(body.error.code, 'rate_limit_exceeded');
    assert.doesNotMatch(body.error.message, /burst/);
    assert.equal(res.headers.get('x-should-retry'), null);
    // Truthful: the time the bucket needs, at 10 tokens/s, to hold this request's cost (prompt + max_tokens).
    const remaining = Number(res.headers.get('x-ratelimit-remaining-tokens'));
    const rec = (await stack.usage()).find((r) => r.request_id === 'retryable-429');
    assert.ok(rec, 'the 429 has its usage record');
    const deficit = rec.input_tokens + 100 - remaining;
    assert.ok(deficit > 0, `deficit ${deficit}`);
    const retryAfter = Number(res.headers.get('retry-after'));
    assert.ok(Math.abs(retryAfter - Math.ceil(deficit / 10)) <= 1, `Retry-After ${retryAfter} for a deficit of ${deficit} tokens at 10/s`);
    holder.destroy();
    await holder.done;
  } finally {
    for (const r of stack.replicas.values()) await setFault(r.url, { mode: 'none' });
  }
});
