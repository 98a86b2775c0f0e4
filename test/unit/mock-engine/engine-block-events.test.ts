// MockEngine.setBlockEvents: every block the prefix cache stores is reported with its parent hash, its
// tokens and the adapter, every evicted one as removed, so that what was stored and not removed is exactly
// what the engine caches (what vLLM's KV events let a subscriber rebuild).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { blockHashes, engineOnVirtualClock } from './harness.ts';

test('stored blocks carry their parent and tokens; stored minus removed is exactly the cache', () => {
  const { engine, clock } = engineOnVirtualClock({ profile: 'tiny', numGpuBlocks: 12 });
  const live = new Set<number>();
  const stored: Array<{ hash: number; parent: number | null; tokens: number[]; adapter: string | null }> = [];
  let removed = 0;
  engine.setBlockEvents({
    stored(hash, parent, tokens, index, adapter) {
      assert.ok(!live.has(hash), 'a hash is stored once while cached');
      live.add(hash);
      stored.push({ hash, parent, tokens: tokens === null ? [] : Array.from({ length: 16 }, (_, t) => tokens[index * 16 + t]!), adapter });
    },
    removed(hash) {
      assert.ok(live.delete(hash), 'only a cached hash is removed');
      removed++;
    },
  });
  const add = (seed: number, adapter: string | null = null): number[] => {
    const hashes = blockHashes(64, { uniqueSeed: seed });
    const tokenIds = Array.from({ length: 64 + 4 }, (_, i) => seed * 1000 + i);
    engine.add({ id: `r${seed}`, promptTokens: 64, outputTokens: 4, blockHashes: hashes, finishReason: 'length', adapter, tokenIds }, { onFirstToken() {}, onToken() {}, onFinish() {} });
    clock.runUntilIdle();
    return hashes;
  };
  const h = add(1);
  assert.deepEqual(stored.slice(0, 4).map((s) => s.hash), h.slice(0, 4));
  assert.deepEqual(stored.slice(0, 4).map((s) => s.parent), [null, h[0], h[1], h[2]], 'each block chains from the one before');
  assert.deepEqual(stored[2]!.tokens, Array.from({ length: 16 }, (_, t) => 1000 + 32 + t), "block 2's tokens");
  for (let seed = 2; seed < 8; seed++) add(seed);
  assert.ok(removed > 0, '11 usable blocks cannot keep seven 4-block prompts');
  assert.equal(live.size, engine.snapshot().cached_blocks, 'what the events say is cached is what is cached');
  const [storedBefore, removedBefore] = [stored.length, removed];
  engine.setBlockEvents(null);
  add(9);
  assert.deepEqual([stored.length, removed], [storedBefore, removedBefore], 'no reports once unset');
});
