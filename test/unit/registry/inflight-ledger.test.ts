import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  InflightLedger, LEDGER_INFLIGHT, LEDGER_OUTSTANDING_TOKENS, LEDGER_PREFILL_TOKENS, LEDGER_RESERVED_BLOCKS,
  LEDGER_RUNNING, LEDGER_OUTPUT_TOKENS, LEDGER_DISPATCHED_BLOCKS,
} from '../../../src/registry/inflight-ledger.ts';

/** The in-flight fields (every field but the cumulative dispatched-blocks counter). */
function all(l: InflightLedger, slot: number): number[] {
  return Array.from({ length: LEDGER_DISPATCHED_BLOCKS }, (_, f) => l.get(slot, f));
}

void test('a dispatch with a predicted cache hit charges only the uncached prompt as prefill work, the whole sequence as KV', () => {
  const l = new InflightLedger(2);
  const e = l.dispatch(1, 1600, 400, 16, 100);
  assert.equal(l.get(1, LEDGER_PREFILL_TOKENS), 100);
  assert.equal(l.get(1, LEDGER_OUTSTANDING_TOKENS), 500);
  assert.equal(l.get(1, LEDGER_RESERVED_BLOCKS), 125);
  assert.equal(l.get(1, LEDGER_DISPATCHED_BLOCKS), 125);
  l.firstToken(e);
  assert.equal(l.get(1, LEDGER_PREFILL_TOKENS), 0);
  assert.equal(l.get(1, LEDGER_OUTSTANDING_TOKENS), 400);
  l.end(e);
  assert.deepEqual(all(l, 1), [0, 0, 0, 0, 0, 0]);
  assert.equal(l.get(1, LEDGER_DISPATCHED_BLOCKS), 125, 'the cumulative counter only grows');
  l.dispatch(1, 16, 16, 16);
  assert.equal(l.get(1, LEDGER_DISPATCHED_BLOCKS), 127);
});

void test('a request moves through prefill, decode and end and leaves the slot at zero', () => {
  const l = new InflightLedger(4);
  const e = l.dispatch(2, 100, 50, 16);
  assert.equal(l.get(2, LEDGER_INFLIGHT), 1);
  assert.equal(l.get(2, LEDGER_PREFILL_TOKENS), 100);
  assert.equal(l.get(2, LEDGER_OUTSTANDING_TOKENS), 150);
  assert.equal(l.get(2, LEDGER_RESERVED_BLOCKS), 10);
  l.firstToken(e);
  l.tokens(e, 1);
  assert.equal(l.get(2, LEDGER_PREFILL_TOKENS), 0);
  assert.equal(l.get(2, LEDGER_RUNNING), 1);
  assert.equal(l.get(2, LEDGER_OUTSTANDING_TOKENS), 49);
  l.tokens(e, 60); // more than max_tokens reported: outstanding never goes below zero for this request
  assert.equal(l.get(2, LEDGER_OUTSTANDING_TOKENS), 0);
  assert.equal(l.get(2, LEDGER_OUTPUT_TOKENS), 61);
  l.end(e);
  l.end(e);
  assert.deepEqual(all(l, 2), [0, 0, 0, 0, 0, 0]);
  assert.deepEqual(all(l, 1), [0, 0, 0, 0, 0, 0]);
});

void test('ending a request that never produced a token releases its prefill work', () => {
  const l = new InflightLedger(1);
  const a = l.dispatch(0, 300, 10, 16);
  const b = l.dispatch(0, 20, 5, 16);
  l.end(a);
  assert.equal(l.get(0, LEDGER_PREFILL_TOKENS), 20);
  assert.equal(l.get(0, LEDGER_OUTSTANDING_TOKENS), 25);
  l.firstToken(a); // late events after end change nothing
  assert.equal(l.get(0, LEDGER_RUNNING), 0);
  l.end(b);
  assert.deepEqual(all(l, 0), [0, 0, 0, 0, 0, 0]);
});

void test('two ledgers over one buffer see the same figures', () => {
  const a = new InflightLedger(2);
  const b = new InflightLedger(a.buffer);
  a.dispatch(1, 64, 64, 16);
  assert.equal(b.get(1, LEDGER_RESERVED_BLOCKS), 8);
});
