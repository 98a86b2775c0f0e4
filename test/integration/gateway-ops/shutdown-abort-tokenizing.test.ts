// At the end of the shutdown grace period GatewayServer.shutdown() aborts the work of every request still in
// flight, including a prompt on the tokenizer's worker pool. That request gets 503 shutting_down with
// Retry-After, like a request refused while draining, not a 400 invalid_value ("The prompt could not be
// tokenized") that would blame the client's prompt for the gateway's own shutdown.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { ALPHA_KEY, startStack, waitFor, type TestStack } from '../../helpers/start-gateway.ts';

let stack: TestStack | null = null;

after(async () => {
  await stack?.close();
});

test('a request still tokenizing when the grace period ends is a 503 shutting_down, not a 400', async () => {
  stack = await startStack({
    pools: [{ id: '8b', model: 'llama-3.1-8b-instruct', aliases: ['gpt-fast'], maxContextTokens: 131072, replicas: [{ profile: 'tiny' }] }],
    config: { tokenizer: { threads: 1, inline_max_chars: 1024 } },
  });
  const words: string[] = [];
  for (let k = 0; k < 300_000; k++) words.push(randomBytes(4).toString('hex'));
  const tok = stack.gateway.services.tokenizer as unknown as { stats(): { pooled: number; completed: number } };
  const before = tok.stats().pooled;
  const pending = fetch(`${stack.url}/v1/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ALPHA_KEY}`, 'content-type': 'application/json', 'x-request-id': 'shutdown-tokenizing' },
    body: JSON.stringify({ model: 'gpt-fast', prompt: words.join(' '), max_tokens: 4 }),
  }).then(async (r) => ({ status: r.status, body: await r.text() }), (e: Error) => ({ status: 0, body: e.message }));
  await waitFor(() => tok.stats().pooled > before, 10000, 1);
  await stack.gateway.close(0);
  const res = await pending;
  assert.notEqual(res.status, 400, `the gateway's shutdown was reported as the client's fault: ${res.body}`);
  assert.equal(res.status, 503, res.body);
  assert.match(res.body, /"code":"shutting_down"/);
});
