// Usage figures a replica reports with the wrong type (`"completion_tokens":"7"`) never reach
// gateway_tokens_total as such. The gateway feeds replica-reported figures into that counter, and
// fast-children.ts's counter child adds with `+=`: were a numeric string let through, it would be concatenated
// into the output-token series of an existing pool/tenant for good (5 then "57", "575" after the next
// 5-token request). The fast child refuses non-numbers as stock prom-client's Counter.inc does.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Counter, Registry } from 'prom-client';
import { ALPHA_KEY, type TestStack } from '../../helpers/start-gateway.ts';
import { startCannedStack } from '../../helpers/canned-replica.ts';
import { counterChild } from '../../../src/metrics/fast-children.ts';

let stack: TestStack;
let canned: Awaited<ReturnType<typeof startCannedStack>>;
/** completion_tokens the scripted replica reports next (a number, or whatever a buggy backend sends). */
let nextCompletionTokens: unknown = 5;

before(async () => {
  canned = await startCannedStack(() => JSON.stringify({
    id: 'cmpl-1', object: 'chat.completion', created: 1, model: 'llama-3.1-8b-instruct',
    choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }],
    usage: { prompt_tokens: 5, completion_tokens: nextCompletionTokens, total_tokens: 12 },
  }));
  stack = canned.stack;
});

after(() => canned.close());

async function complete(id: string): Promise<number> {
  const res = await fetch(`${stack.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ALPHA_KEY}`, 'content-type': 'application/json', 'x-request-id': id },
    body: JSON.stringify({ model: 'gpt-fast', messages: [{ role: 'user', content: 'hi' }], max_tokens: 16 }),
  });
  await res.text();
  return res.status;
}

async function outputTokensSeries(): Promise<string> {
  const text = await (await fetch(`${stack.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith('gateway_tokens_total{pool="8b",tenant="other",kind="output"}'));
  assert.ok(line, 'output token series present');
  return line.slice(line.lastIndexOf(' ') + 1);
}

test('a replica that reports completion_tokens as a string does not corrupt gateway_tokens_total', async () => {
  nextCompletionTokens = 5;
  assert.equal(await complete('num-1'), 200);
  await new Promise((r) => setTimeout(r, 50)); // finishRequest runs after the response is sent
  assert.equal(await outputTokensSeries(), '5');
  nextCompletionTokens = '7'; // a non-vLLM OpenAI-compatible backend, or a proxy that stringifies numbers
  await complete('str-1');
  nextCompletionTokens = 5;
  assert.equal(await complete('num-2'), 200);
  await new Promise((r) => setTimeout(r, 50));
  const v = await outputTokensSeries();
  // Stock prom-client refuses the string (the series stays 10 = 5 + 5); summing it as a number gives 17.
  // Anything else is a corrupted counter.
  assert.ok(v === '10' || v === '17', `gateway_tokens_total{kind="output"} is ${JSON.stringify(v)}: expected 10 or 17`);
});

test('counterChild rejects what stock prom-client rejects (non-number increments)', () => {
  const reg = new Registry();
  const c = new Counter({ name: 'c_total', help: 'h', labelNames: ['k'] as const, registers: [reg] });
  const fast = counterChild(c, 'a');
  fast.inc(5); // the series now exists: later calls take the fast path
  const stock = c.labels('a');
  assert.throws(() => stock.inc('7' as unknown as number), /not a valid number/, 'stock prom-client refuses a string');
  assert.throws(() => fast.inc('7' as unknown as number), /not a valid number/, 'the fast child must refuse it too');
});
