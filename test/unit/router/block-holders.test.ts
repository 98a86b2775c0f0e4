// The anchors' prefix index: every replica that holds a hash (no holder cap), a per-replica LRU bounded by
// its capacity (llm-d's approximate index: llm-d/llm-d-router pkg/epp/framework/plugins/requestcontrol/
// dataproducer/approximateprefix, a set of pods per hash and an LRU of hashes per pod sized from
// num_gpu_blocks), and the event-fed use (stored / removed / cleared, as vLLM's KV events report them).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BlockHolders } from '../../../src/router/anchors/block-holders.ts';
import { hashes } from './fleet-fixture.ts';

void test('a hash held by every one of 12 replicas is matched on all 12 (no holder cap)', () => {
  const idx = new BlockHolders(12);
  const h = hashes(8, 1);
  for (let s = 0; s < 12; s++) idx.insert(h, 0, s);
  assert.equal(idx.holderCount(h[0]!), 12);
  const out = new Int32Array(12);
  assert.equal(idx.lookup(h, Array.from({ length: 12 }, (_, i) => i), out), 8);
  assert.deepEqual([...out], new Array(12).fill(8));
});

void test('lookup: each candidate\'s run from block 0 to its first missing block; non-candidates ignored', () => {
  const idx = new BlockHolders(4);
  const h = hashes(10, 2);
  idx.insert(h.subarray(0, 6), 0, 0);
  idx.insert(h, 0, 1);
  idx.insert(h.subarray(1), 0, 2); // holds every block but block 0: no run
  idx.insert(h, 0, 3);
  const out = new Int32Array(3);
  assert.equal(idx.lookup(h, [0, 2, 1], out), 10);
  assert.deepEqual([...out], [6, 0, 10]);
  idx.remove(1, h[4]!);
  assert.equal(idx.lookup(h, [1], out), 4, 'a removed block ends the run there');
});

void test('per-replica LRU: over its capacity a replica forgets its least recently stored block', () => {
  const idx = new BlockHolders(2, 5);
  const a = hashes(4, 3);
  const b = hashes(3, 4);
  idx.insert(a, 0, 0);
  idx.insert(a, 0, 1);
  idx.insert(b, 0, 0); // 7 blocks into 5: a[0] and a[1] (the oldest) go
  assert.equal(idx.count(0), 5);
  assert.equal(idx.evictions, 2);
  assert.deepEqual([idx.holds(0, a[0]!), idx.holds(0, a[1]!), idx.holds(0, a[2]!)], [false, false, true]);
  assert.equal(idx.holds(1, a[0]!), true, 'the other replica is unaffected');
  idx.insert(a.subarray(2, 3), 0, 0); // a[2] refreshed: now newest
  idx.insert(hashes(1, 5), 0, 0); // one more: a[3] is now the oldest
  assert.deepEqual([idx.holds(0, a[2]!), idx.holds(0, a[3]!)], [true, false]);
});

void test('setCapacity shrinks a replica at once; the default is unbounded', () => {
  const idx = new BlockHolders(1);
  idx.insert(hashes(100, 6), 0, 0);
  assert.equal(idx.count(0), 100);
  idx.setCapacity(0, 30);
  assert.equal(idx.count(0), 30);
  assert.equal(idx.capacity(0), 30);
});

void test('events: stored, removed, cleared; a cleared replica matches nothing and frees its memberships', () => {
  const idx = new BlockHolders(2);
  const h = hashes(5, 7);
  for (const x of h) { idx.store(0, x); idx.store(1, x); }
  assert.equal(idx.remove(0, h[2]!), true);
  assert.equal(idx.remove(0, h[2]!), false, 'removing what is not held is a no-op');
  const out = new Int32Array(2);
  idx.lookup(h, [0, 1], out);
  assert.deepEqual([...out], [2, 5]);
  idx.clearSlot(1);
  assert.equal(idx.count(1), 0);
  idx.lookup(h, [0, 1], out);
  assert.deepEqual([...out], [2, 0]);
  idx.clearSlot(0);
  assert.equal(idx.hashes(), 0, 'no hash is left without holders');
});

void test('grows past its initial arrays and reuses freed memberships', () => {
  const idx = new BlockHolders(3, 3000);
  for (let s = 0; s < 3; s++) idx.insert(hashes(5000, 10 + s), 0, s);
  assert.deepEqual([idx.count(0), idx.count(1), idx.count(2)], [3000, 3000, 3000]);
  const h = hashes(5000, 11);
  const out = new Int32Array(1);
  assert.equal(idx.lookup(h, [1], out), 0, 'the chain\'s oldest blocks (its start) were evicted first');
  assert.equal(idx.holds(1, h[4999]!), true);
});
