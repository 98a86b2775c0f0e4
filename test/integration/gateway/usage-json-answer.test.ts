// For a 200 non-streaming answer the usage figures are read out of the body (takeJsonFigures) after the body
// was handed to the client (sink.end). The usage record carries the replica's own figures: prompt,
// completion and cached tokens, and finish_reason.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { ALPHA_KEY, type TestStack } from '../../helpers/start-gateway.ts';
import { startCannedStack } from '../../helpers/canned-replica.ts';

let stack: TestStack;
let canned: Awaited<ReturnType<typeof startCannedStack>>;
const BODY = JSON.stringify({
  id: 'cmpl-1', object: 'chat.completion', created: 1, model: 'llama-3.1-8b-instruct',
  choices: [{ index: 0, message: { role: 'assistant', content: 'a "usage":{ lookalike' }, finish_reason: 'length' }],
  usage: { prompt_tokens: 9, completion_tokens: 6, total_tokens: 15, prompt_tokens_details: { cached_tokens: 4 } },
});

before(async () => {
  canned = await startCannedStack(() => BODY);
  stack = canned.stack;
});

after(() => canned.close());

test('a non-streaming 200 passes the body through unchanged and records the replica usage figures', async () => {
  const ids = ['json-usage-1', 'json-usage-2', 'json-usage-3'];
  const bodies = await Promise.all(ids.map(async (id) => {
    const res = await fetch(`${stack.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ALPHA_KEY}`, 'content-type': 'application/json', 'x-request-id': id },
      body: JSON.stringify({ model: 'gpt-fast', messages: [{ role: 'user', content: 'hi' }], max_tokens: 16 }),
    });
    assert.equal(res.status, 200);
    return res.text();
  }));
  for (const b of bodies) assert.equal(b, BODY, 'the client gets the replica body byte for byte');
  let recs: Awaited<ReturnType<TestStack['usage']>> = [];
  for (let i = 0; i < 100; i++) {
    recs = (await stack.usage()).filter((r) => ids.includes(r.request_id));
    if (recs.length === ids.length) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.equal(recs.length, ids.length);
  for (const rec of recs) {
    assert.deepEqual(
      [rec.status, rec.input_tokens, rec.output_tokens, rec.cached_tokens, rec.finish_reason, rec.ttft_ms],
      [200, 9, 6, 4, 'length', null],
      `usage record of ${rec.request_id}`,
    );
  }
});
