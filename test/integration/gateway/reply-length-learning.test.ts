// Reply lengths in a real gateway in front of real mock replicas: the gateway learns them from finished
// streams (the mock's natural lengths: log-uniform over 8-512 tokens, median ~64), reports its forecast's
// error as a gauge, and a stream sent without max_tokens (the pool's default of 1,024 goes upstream) is
// budgeted in the ledger at its forecast, not at the cap: reserved KV and outstanding work while it runs.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { ALPHA_KEY, startStack, type TestStack } from '../../helpers/start-gateway.ts';
import { LEDGER_OUTSTANDING_TOKENS, LEDGER_RESERVED_BLOCKS } from '../../../src/registry/inflight-ledger.ts';

let stack: TestStack;

before(async () => {
  stack = await startStack({ config: { registry: { scrape_interval_ms: 50 } } });
});

after(async () => {
  await stack.close();
});

function body(i: number, stream: boolean): string {
  return JSON.stringify({ model: 'gpt-fast', messages: [{ role: 'user', content: `Question ${i}: tell me about the number ${i * 7919}.` }], stream });
}

async function ask(i: number): Promise<number> {
  const res = await fetch(`${stack.url}/v1/chat/completions`, {
    method: 'POST', headers: { authorization: `Bearer ${ALPHA_KEY}`, 'content-type': 'application/json' }, body: body(i, false),
  });
  assert.equal(res.status, 200);
  const json = (await res.json()) as { usage: { completion_tokens: number } };
  return json.usage.completion_tokens;
}

test('finished replies teach the forecast; a stream without max_tokens is budgeted at it, not at the 1,024 cap', async () => {
  const lengths: number[] = [];
  for (let i = 0; i < 40; i++) lengths.push(await ask(i));
  assert.ok(lengths.every((n) => n >= 8 && n <= 512), 'natural lengths, none at the cap');
  const page = await (await fetch(`${stack.url}/metrics`)).text();
  const p50 = /gateway_reply_length_prediction_error_p50_ratio\{pool="8b"\} ([0-9.e+-]+)/.exec(page);
  const p90 = /gateway_reply_length_prediction_error_p90_ratio\{pool="8b"\} ([0-9.e+-]+)/.exec(page);
  assert.ok(p50 !== null && p90 !== null, 'the gauges are served for the pool');
  assert.ok(Number(p50[1]) >= 0 && Number(p50[1]) <= Number(p90[1]));

  const res = await fetch(`${stack.url}/v1/chat/completions`, {
    method: 'POST', headers: { authorization: `Bearer ${ALPHA_KEY}`, 'content-type': 'application/json' }, body: body(1000, true),
  });
  assert.equal(res.status, 200);
  const reader = res.body!.getReader();
  await reader.read(); // the first chunk: the stream is in flight
  const ledger = stack.gateway.registry.ledger;
  let reserved = 0;
  let outstanding = 0;
  for (let slot = 0; slot < ledger.slots; slot++) {
    reserved += ledger.get(slot, LEDGER_RESERVED_BLOCKS);
    outstanding += ledger.get(slot, LEDGER_OUTSTANDING_TOKENS);
  }
  // The prompt is ~40 tokens (3 blocks); the cap alone would be 64 blocks and 1,024 outstanding tokens.
  assert.ok(reserved > 0 && reserved < 40, `reserved ${reserved} blocks`);
  assert.ok(outstanding > 0 && outstanding < 300, `outstanding ${outstanding} tokens`);
  while (!(await reader.read()).done);
});
