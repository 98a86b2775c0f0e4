// The block pool's hash table (open addressing, backward-shift deletion) against a Map doing the same
// operations: tens of thousands of random caches, evictions and lookups in a small pool, where probe runs
// wrap around the table and deletions shift entries.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BlockPool } from '../../../test/mock-replica/engine/block-pool.ts';

test('lookups agree with a Map through random cache/evict cycles', () => {
  const n = 64;
  const pool = new BlockPool(n);
  const ref = new Map<number, number>();
  const hashOf = new Map<number, number>();
  let seed = 12345;
  const rand = (): number => {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    return seed;
  };
  // A small key space (53-bit values, few distinct) so the same hash comes back after eviction.
  const keys = Array.from({ length: 200 }, (_, i) => (i * 0x9e3779b9 % 2 ** 21) * 2 ** 32 + ((i * 2654435761) >>> 0));
  const held: number[] = [];
  for (let step = 0; step < 50_000; step++) {
    const op = rand() % 3;
    if (op === 0 && pool.freeBlocks > 0) {
      const id = pool.allocate();
      const old = hashOf.get(id);
      if (old !== undefined) {
        if (ref.get(old) === id) ref.delete(old);
        hashOf.delete(id);
      }
      const h = keys[rand() % keys.length]!;
      if (pool.cacheBlock(id, h)) {
        assert.ok(!ref.has(h));
        ref.set(h, id);
        hashOf.set(id, h);
      } else {
        assert.ok(ref.has(h));
      }
      held.push(id);
    } else if (op === 1 && held.length > 0) {
      const at = rand() % held.length;
      pool.free([held[at]!]);
      held.splice(at, 1);
    } else {
      const h = keys[rand() % keys.length]!;
      assert.equal(pool.lookup(h), ref.get(h) ?? -1);
    }
    assert.equal(pool.cachedBlocks, ref.size);
  }
  for (const h of keys) assert.equal(pool.lookup(h), ref.get(h) ?? -1);
});
