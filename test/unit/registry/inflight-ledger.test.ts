import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  InflightLedger, newLedgerEntry, LEDGER_INFLIGHT, LEDGER_OUTSTANDING_TOKENS, LEDGER_PREFILL_TOKENS, LEDGER_RESERVED_BLOCKS,
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

void test('with a reply forecast: the mean is outstanding work, the KV figure is reserved, both revised as the stream runs past them', () => {
  const l = new InflightLedger(1);
  // A forecast of mean 100 and KV figure 200; past k tokens: mean k + 50, KV k + 100 (per sequence).
  const reply = { meanTokens: 100, kvTokens: 200, meanAfter: (k: number) => k + 50, kvAfter: (k: number) => k + 100 };
  const e = l.dispatch(0, 320, 4000, 16, 320, reply);
  assert.equal(l.get(0, LEDGER_OUTSTANDING_TOKENS), 320 + 100, 'prompt + expected reply, not max_tokens');
  assert.equal(l.get(0, LEDGER_RESERVED_BLOCKS), Math.ceil((320 + 200) / 16), 'prompt + KV figure');
  l.firstToken(e);
  l.tokens(e, 99);
  assert.equal(l.get(0, LEDGER_OUTSTANDING_TOKENS), 1);
  l.tokens(e, 1);
  assert.equal(l.get(0, LEDGER_OUTSTANDING_TOKENS), 50, 'at its expected length: 50 more expected');
  assert.equal(l.get(0, LEDGER_RESERVED_BLOCKS), 33, 'still within its KV figure');
  l.tokens(e, 100);
  assert.equal(l.get(0, LEDGER_RESERVED_BLOCKS), Math.ceil((320 + 300) / 16), 'past its KV figure: reserved to 300');
  assert.equal(l.get(0, LEDGER_DISPATCHED_BLOCKS), Math.ceil((320 + 300) / 16), 'the growth counts as dispatched since the scrape');
  assert.equal(l.get(0, LEDGER_OUTSTANDING_TOKENS), 50);
  l.end(e);
  assert.deepEqual(all(l, 0), [0, 0, 0, 0, 0, 0]);
  // Never above max_tokens × n: two sequences, cap 300 in all.
  const two = l.dispatch(0, 16, 300, 16, 16, reply, 2);
  assert.equal(l.get(0, LEDGER_OUTSTANDING_TOKENS), 16 + 200);
  assert.equal(l.get(0, LEDGER_RESERVED_BLOCKS), Math.ceil((16 + 300) / 16));
  l.firstToken(two);
  l.tokens(two, 250);
  assert.equal(l.get(0, LEDGER_OUTSTANDING_TOKENS), 50, 'revised to the cap, 300');
  l.end(two);
  assert.deepEqual(all(l, 0), [0, 0, 0, 0, 0, 0]);
});

void test('a one-thread ledger (sameThread, the simulator\'s) keeps the same cells as the shared one, wrapping alike', () => {
  const shared = new InflightLedger(3);
  const local = new InflightLedger(3, true);
  const cells = (l: InflightLedger): number[] => Array.from(new Int32Array(l.buffer));
  const reply = { kvTokens: 40, meanTokens: 20, kvAfter: (p: number): number => p + 30, meanAfter: (p: number): number => p + 10 };
  const run = (l: InflightLedger): void => {
    const a = l.dispatch(0, 1000, 200, 16, 300, reply);
    const b = l.dispatch(2, 64, 8, 16);
    l.firstToken(a);
    for (let i = 0; i < 120; i++) l.tokens(a, 1);
    l.tokens(b, 3);
    l.end(b);
    // The cumulative counter wraps at 32 bits as Atomics.add's does.
    for (let i = 0; i < 3; i++) l.dispatch(1, 1, 2 ** 30 * 16, 16);
  };
  run(shared);
  run(local);
  assert.deepEqual(cells(local), cells(shared));
  assert.ok(local.get(1, LEDGER_DISPATCHED_BLOCKS) < 0, 'wrapped');
});

void test('dispatchInto fills an entry the caller keeps, which counts as dispatch() would and can be filled again once ended', () => {
  const a = new InflightLedger(2, true);
  const b = new InflightLedger(2, true);
  const kept = newLedgerEntry();
  a.tokens(kept, 3); // not dispatched yet: ended, nothing counts
  assert.deepEqual(all(a, 1), [0, 0, 0, 0, 0, 0]);
  for (let attempt = 0; attempt < 2; attempt++) {
    const e = b.dispatch(1, 1600, 400, 16, 100);
    assert.equal(a.dispatchInto(kept, 1, 1600, 400, 16, 100), kept);
    assert.deepEqual({ ...kept }, { ...e });
    for (const [l, x] of [[a, kept], [b, e]] as const) {
      l.firstToken(x);
      l.tokens(x, 5);
    }
    assert.deepEqual(all(a, 1), all(b, 1));
    a.end(kept);
    b.end(e);
    assert.deepEqual(all(a, 1), [0, 0, 0, 0, 0, 0]);
  }
  assert.equal(a.get(1, LEDGER_DISPATCHED_BLOCKS), b.get(1, LEDGER_DISPATCHED_BLOCKS));
});
