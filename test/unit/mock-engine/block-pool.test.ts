import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BlockPool } from '../../mock-replica/engine/block-pool.ts';

void test('block 0 is the null block: a pool of N blocks hands out N − 1', () => {
  const pool = new BlockPool(5);
  assert.equal(pool.usableBlocks, 4);
  const got = [pool.allocate(), pool.allocate(), pool.allocate(), pool.allocate()];
  assert.deepEqual(got, [1, 2, 3, 4]);
  assert.equal(pool.allocate(), -1);
  assert.equal(pool.usage(), 1);
});

void test('freed hashed blocks go to the tail in reverse order, hash-less ones to the head', () => {
  const pool = new BlockPool(8);
  const a = [pool.allocate(), pool.allocate(), pool.allocate()]; // 1 2 3
  pool.cacheBlock(a[0]!, 100);
  pool.cacheBlock(a[1]!, 101); // a[2] is a partial block: no hash
  pool.free(a);
  assert.deepEqual(pool.freeQueue(), [3, 4, 5, 6, 7, 2, 1]);
});

void test('allocation evicts the LRU cached block and forgets its hash', () => {
  const pool = new BlockPool(3);
  const x = pool.allocate();
  const y = pool.allocate();
  pool.cacheBlock(x, 1);
  pool.cacheBlock(y, 2);
  pool.free([x]);
  pool.free([y]);
  assert.equal(pool.cachedBlocks, 2);
  assert.equal(pool.allocate(), x);
  assert.equal(pool.lookup(1), -1);
  assert.equal(pool.lookup(2), y);
  assert.equal(pool.evictions, 1);
});

void test('touching a free cached block takes it out of the free queue; the last release puts it back', () => {
  const pool = new BlockPool(4);
  const b = pool.allocate();
  pool.cacheBlock(b, 42);
  pool.free([b]);
  assert.equal(pool.freeBlocks, 3);
  pool.touch(pool.lookup(42));
  pool.touch(pool.lookup(42));
  assert.equal(pool.refs(b), 2);
  assert.equal(pool.freeBlocks, 2);
  assert.ok(Math.abs(pool.usage() - 1 / 3) < 1e-12);
  pool.free([b]);
  assert.equal(pool.freeBlocks, 2);
  pool.free([b]);
  assert.equal(pool.freeBlocks, 3);
  assert.equal(pool.lookup(42), b, 'a freed block keeps its hash until evicted');
  assert.throws(() => pool.free([b]), /freed more often/);
});

void test('a second block with an already cached hash stays uncached, as vLLM keeps the first copy', () => {
  const pool = new BlockPool(4);
  const a = pool.allocate();
  const b = pool.allocate();
  assert.equal(pool.cacheBlock(a, 7), true);
  assert.equal(pool.cacheBlock(b, 7), false);
  assert.equal(pool.lookup(7), a);
  pool.free([b]);
  assert.deepEqual(pool.freeQueue(), [b, 3]);
});

void test('the listener hears each hash stored and each cached hash evicted, in order, and nothing else', () => {
  const pool = new BlockPool(3);
  const heard: string[] = [];
  pool.listener = { stored: (h, b) => heard.push(`+${h}@${b}`), removed: (h, b) => heard.push(`-${h}@${b}`) };
  const x = pool.allocate();
  const y = pool.allocate();
  pool.cacheBlock(x, 7);
  pool.cacheBlock(y, 7); // a second block with the same hash stays uncached: no event
  pool.free([x, y]); // y (hash-less) goes to the head, x to the tail
  pool.allocate(); // takes y: nothing cached there
  pool.allocate(); // takes x: its hash 7 is evicted
  assert.deepEqual(heard, [`+7@${x}`, `-7@${x}`]);
});
