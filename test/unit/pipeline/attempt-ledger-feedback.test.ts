// One UpstreamAttempt owns its ledger entry and its routing feedback: the entry opens at dispatch with the
// prefill work less the router's predicted cache hit, the first token moves it from prefill to running, and
// whatever ends the attempt gives everything back exactly once, after which the router hears `finished`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  LEDGER_FIELDS, LEDGER_INFLIGHT, LEDGER_OUTSTANDING_TOKENS, LEDGER_PREFILL_TOKENS, LEDGER_RESERVED_BLOCKS, LEDGER_RUNNING, type InflightLedger,
} from '../../../src/registry/inflight-ledger.ts';
import type { ClientSink, HeaderList } from '../../../src/relay/client-sink.ts';
import { attemptHarness } from './attempt-harness.ts';

class NullSink implements ClientSink {
  aborted = false;
  started = false;
  body = '';
  begin(_s: number, _h: HeaderList): void { this.started = true; }
  write(c: Uint8Array | string): boolean { this.body += Buffer.from(c).toString(); return true; }
  end(c?: Uint8Array | string): void { if (c !== undefined) this.write(c); this.started = true; }
  onDrain(): void {}
  setAbortHandler(): void {}
  cork(fn: () => void): void { fn(); }
}

const cells = (l: InflightLedger): number[] => Array.from({ length: LEDGER_FIELDS }, (_, f) => l.get(0, f));
const idle = (l: InflightLedger): void => {
  for (const f of [LEDGER_INFLIGHT, LEDGER_PREFILL_TOKENS, LEDGER_RUNNING, LEDGER_OUTSTANDING_TOKENS, LEDGER_RESERVED_BLOCKS]) assert.equal(l.get(0, f), 0, `ledger field ${f}`);
};
const frame = (o: unknown): string => `data: ${JSON.stringify(o)}\n\n`;
const FIRST = frame({ choices: [{ index: 0, delta: { content: 'Hi' }, finish_reason: null }] });
const REST = frame({ choices: [{ index: 0, delta: { content: '!' }, finish_reason: 'stop' }] })
  + frame({ choices: [], usage: { prompt_tokens: 40, completion_tokens: 2, prompt_tokens_details: { cached_tokens: 32 } } })
  + 'data: [DONE]\n\n';

test('a stream: dispatched with the predicted-uncached prefill, first token moves it to running, the end releases it once', async () => {
  const h = attemptHarness(new NullSink(), { stream: true, promptTokens: 40, cachedBlocks: 1 });
  assert.deepEqual(h.feedback, ['dispatched']);
  assert.equal(h.ledger.get(0, LEDGER_INFLIGHT), 1);
  assert.equal(h.ledger.get(0, LEDGER_PREFILL_TOKENS), 40 - 16, 'one cached 16-token block is not prefill work');
  assert.equal(h.ledger.get(0, LEDGER_RESERVED_BLOCKS), Math.ceil((40 + 16) / 16), 'the KV reservation covers the whole prompt');
  h.a.onStart(200);
  h.a.onData(Buffer.from(FIRST));
  assert.deepEqual(h.feedback, ['dispatched', 'firstToken ok']);
  assert.equal(h.ledger.get(0, LEDGER_PREFILL_TOKENS), 0);
  assert.equal(h.ledger.get(0, LEDGER_RUNNING), 1);
  h.a.onData(Buffer.from(REST));
  assert.equal(h.tokenChunks.n, 1, 'a later chunk with a token tells the GPU-time model a step ended (the first token\'s step reaches it through firstToken)');
  h.a.onEnd();
  assert.deepEqual(await h.outcome, { kind: 'sent', failure: null });
  assert.deepEqual(h.feedback, ['dispatched', 'firstToken ok', 'finished 32 null'], 'finished carries the cached tokens the replica reported');
  idle(h.ledger);
  const after = cells(h.ledger);
  h.a.onError('reset', new Error('late socket error'));
  assert.deepEqual(cells(h.ledger), after, 'a late event releases nothing twice');
  assert.equal(h.feedback.length, 3, 'finished is reported once');
  assert.equal(h.ctx.call, null);
});

test('a predicted hit larger than the prompt leaves no prefill work, never a negative one', async () => {
  const h = attemptHarness(new NullSink(), { stream: false, promptTokens: 40, cachedBlocks: 5 });
  assert.equal(h.ledger.get(0, LEDGER_PREFILL_TOKENS), 0);
  assert.equal(h.ledger.get(0, LEDGER_OUTSTANDING_TOKENS), 16, 'only the output is outstanding');
  h.a.onStart(200);
  h.a.onData(Buffer.from('{"choices":[{"finish_reason":"stop"}],"usage":{"prompt_tokens":40,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":16}}}'));
  h.a.onEnd();
  assert.deepEqual(await h.outcome, { kind: 'sent', failure: null });
  assert.deepEqual(h.feedback, ['dispatched', 'firstToken ok', 'finished 16 null'], 'a JSON body is its first token');
  idle(h.ledger);
});

test('a 5xx before the first byte: no first token, finished without cached tokens, ledger released, a retry', async () => {
  const h = attemptHarness(new NullSink(), { stream: true });
  h.a.onStart(503);
  h.a.onData(Buffer.from('{"error":{"message":"overloaded","type":"ServiceUnavailableError","code":503}}'));
  h.a.onEnd();
  const o = await h.outcome;
  assert.equal(o.kind, 'retry');
  assert.equal(o.kind === 'retry' && o.failure, 'status_5xx');
  assert.deepEqual(h.feedback, ['dispatched', 'finished null null']);
  idle(h.ledger);
});

test('no first token within first_token_timeout_ms: the call is aborted and the attempt is a retry', async () => {
  const h = attemptHarness(new NullSink(), { stream: true, firstTokenTimeoutMs: 20 });
  h.a.onStart(200);
  await new Promise((r) => setTimeout(r, 60));
  assert.equal(h.call.aborted, 1);
  // What the upstream client reports for an aborted call.
  h.a.onError('aborted', new Error('aborted'));
  const o = await h.outcome;
  assert.equal(o.kind === 'retry' && o.failure, 'first_token_timeout');
  assert.deepEqual(h.feedback, ['dispatched', 'finished null null']);
  idle(h.ledger);
});

test('a client gone before the first token: cancelled, ledger released', async () => {
  const h = attemptHarness(new NullSink(), { stream: true });
  h.ctx.cancelled = true;
  h.a.onError('aborted', new Error('aborted'));
  assert.deepEqual(await h.outcome, { kind: 'cancelled' });
  assert.deepEqual(h.feedback, ['dispatched', 'finished null null']);
  idle(h.ledger);
});
