import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ByteLru } from '../../../src/tokenize/byte-lru.ts';

test('evicts the least recently inserted entries once the byte budget is exceeded', () => {
  const lru = new ByteLru<string, number>(1000);
  for (let i = 0; i < 10; i++) assert.equal(lru.set(`k${i}`, i, 100), true);
  assert.equal(lru.bytes, 1000);
  lru.set('k10', 10, 100);
  assert.equal(lru.peek('k0'), undefined, 'the oldest entry went first');
  assert.equal(lru.peek('k1'), 1);
  assert.equal(lru.bytes, 1000);
  assert.equal(lru.size, 10);
});

test('an entry larger than an eighth of the budget is refused and evicts nothing', () => {
  const lru = new ByteLru<string, number>(800);
  lru.set('a', 1, 100);
  assert.equal(lru.set('huge', 2, 101), false);
  assert.equal(lru.peek('huge'), undefined);
  assert.equal(lru.peek('a'), 1);
});

test('a hit on an entry in the older half moves it to the newest end, so it outlives entries inserted after it', () => {
  const lru = new ByteLru<string, number>(1000);
  for (let i = 0; i < 10; i++) lru.set(`k${i}`, i, 100);
  assert.equal(lru.get('k0'), 0); // oldest: refreshed
  for (let i = 10; i < 15; i++) lru.set(`k${i}`, i, 100); // five evictions
  assert.equal(lru.peek('k0'), 0, 'refreshed entry kept');
  assert.deepEqual([1, 2, 3, 4, 5].map((i) => lru.peek(`k${i}`)), [undefined, undefined, undefined, undefined, undefined]);
  assert.equal(lru.peek('k6'), 6);
});

test('a hit on an entry in the newer half is a plain lookup (approximate LRU), bounded to half the cache', () => {
  const lru = new ByteLru<string, number>(1000);
  for (let i = 0; i < 10; i++) lru.set(`k${i}`, i, 100);
  assert.equal(lru.get('k8'), 8); // newer half: not moved
  for (let i = 10; i < 19; i++) lru.set(`k${i}`, i, 100); // nine evictions: k0..k8 in insertion order
  assert.equal(lru.peek('k8'), undefined, 'k8 kept its place and was evicted with its neighbours');
  // Every entry that is hit whenever it reaches the older half survives any number of insertions.
  const hot = new ByteLru<string, number>(1000);
  hot.set('hot', 1, 100);
  for (let i = 0; i < 200; i++) {
    hot.set(`cold${i}`, i, 100);
    assert.equal(hot.get('hot'), 1, `hot entry evicted after ${i} insertions`);
  }
});

test('re-setting a key replaces its value and its byte count', () => {
  const lru = new ByteLru<string, number>(1000);
  lru.set('a', 1, 100);
  lru.set('a', 2, 50);
  assert.equal(lru.get('a'), 2);
  assert.equal(lru.bytes, 50);
  assert.equal(lru.size, 1);
});
