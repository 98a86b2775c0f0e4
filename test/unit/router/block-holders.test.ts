// The anchors' prefix index: every replica that holds a hash (no holder cap), a per-replica LRU bounded by
// its capacity (llm-d's approximate index: llm-d/llm-d-router pkg/epp/framework/plugins/requestcontrol/
// dataproducer/approximateprefix, a set of pods per hash and an LRU of hashes per pod sized from
// num_gpu_blocks), and the event-fed use (stored / removed / cleared, as vLLM's KV events report them).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BlockHolders } from '../../../src/router/anchors/block-holders.ts';
import { hashes } from './fleet-fixture.ts';
import { rng } from './xorshift.ts';

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


/** Each candidate's run from holds() alone, block by block: what lookup() must answer. */
function referenceRuns(idx: BlockHolders, h: Float64Array, candidates: readonly number[]): number[] {
  return candidates.map((s) => {
    let b = 0;
    while (b < h.length && idx.holds(s, h[b]!)) b++;
    return b;
  });
}

// lookup() answers from a per-hash bitmap of holders kept beside the per-slot tables; this drives both through
// every way a membership comes and goes (store, insert, remove, clearSlot, the LRU's evictions on store and on
// setCapacity, the holder cap's drops) on 70 slots (three bitmap words) and checks lookup(), holderCount() and
// hashes() against holds() after every step, for candidate lists in any order with repeats.
void test('lookup, holderCount and hashes agree with holds() through random stores, removals, clears, evictions and holder-cap drops', () => {
  const SLOTS = 70;
  const configs = [
    { seed: 1, capacity: Infinity, cap: Infinity, chains: 8, blocks: 40, steps: 3000 },
    { seed: 2, capacity: 60, cap: 4, chains: 8, blocks: 40, steps: 3000 },
    { seed: 3, capacity: Infinity, cap: 1, chains: 8, blocks: 40, steps: 2000 },
    { seed: 4, capacity: 400, cap: Infinity, chains: 12, blocks: 200, steps: 1500 }, // > 1,024 hashes: rows grow
  ];
  for (const c of configs) {
    const r = rng(c.seed);
    const pick = (n: number): number => Math.floor(r() * n);
    // Chains sharing a trunk for a random length (a prefix tree), so runs are long and overlap across slots.
    const trunk = Array.from({ length: c.blocks }, () => Math.floor(r() * 2 ** 53));
    const chains = Array.from({ length: c.chains }, () => {
      const shared = pick(c.blocks + 1);
      return Float64Array.from({ length: c.blocks }, (_, i) => (i < shared ? trunk[i]! : Math.floor(r() * 2 ** 53)));
    });
    const universe = [...new Set(chains.flatMap((ch) => [...ch]))];
    const idx = new BlockHolders(SLOTS, c.capacity, c.cap);
    const out = new Int32Array(3 * SLOTS);
    const used = { store: 0, insert: 0, remove: 0, clear: 0, shrink: 0 };
    for (let step = 0; step < c.steps; step++) {
      const op = r();
      const slot = pick(SLOTS);
      const ch = chains[pick(chains.length)]!;
      if (op < 0.3) {
        idx.store(slot, ch[pick(ch.length)]!);
        used.store++;
      } else if (op < 0.65) {
        idx.insert(ch.subarray(0, 1 + pick(ch.length)), pick(4) === 0 ? pick(ch.length) : 0, slot);
        used.insert++;
      } else if (op < 0.88) {
        // Mostly one of the block's holders (a block in the middle of its run), else any slot.
        const h = ch[pick(ch.length)]!;
        const holders = Array.from({ length: SLOTS }, (_, s) => s).filter((s) => idx.holds(s, h));
        if (idx.remove(holders.length > 0 && pick(4) !== 0 ? holders[pick(holders.length)]! : slot, h)) used.remove++;
      } else if (op < 0.93) {
        idx.clearSlot(slot);
        used.clear++;
      } else {
        const before = idx.evictions;
        idx.setCapacity(slot, 1 + pick(c.blocks * 2));
        if (idx.evictions > before) used.shrink++;
      }
      for (let q = 0; q < 3; q++) {
        const base = chains[pick(chains.length)]!;
        const h = pick(5) === 0 ? new Float64Array(0) : base.subarray(0, 1 + pick(base.length));
        const candidates = Array.from({ length: pick(3 * SLOTS + 1) }, () => pick(SLOTS));
        const want = referenceRuns(idx, h, candidates);
        const best = idx.lookup(h, candidates, out);
        assert.deepEqual([...out.subarray(0, candidates.length)], want, `config ${c.seed} step ${step}: runs of ${JSON.stringify(candidates)}`);
        assert.equal(best, Math.max(0, ...want), `config ${c.seed} step ${step}: longest run`);
      }
      for (let q = 0; q < 4; q++) {
        const h = universe[pick(universe.length)]!;
        let n = 0;
        for (let s = 0; s < SLOTS; s++) if (idx.holds(s, h)) n++;
        assert.equal(idx.holderCount(h), n, `config ${c.seed} step ${step}: holders of ${h}`);
        if (Number.isFinite(c.cap)) assert.ok(n <= c.cap, 'never more holders than the cap');
      }
      if (step % 50 === 0 || step === c.steps - 1) {
        const held = universe.filter((h) => { for (let s = 0; s < SLOTS; s++) if (idx.holds(s, h)) return true; return false; });
        assert.equal(idx.hashes(), held.length, `config ${c.seed} step ${step}: hashes with a holder`);
      }
    }
    // Every way out was taken.
    assert.ok(used.remove > 0 && used.clear > 0 && used.shrink > 0 && idx.evictions > 0, JSON.stringify(used));
    if (Number.isFinite(c.cap)) assert.ok(idx.capDrops > 0, 'the holder cap dropped memberships');
    for (let s = 0; s < SLOTS; s++) idx.clearSlot(s);
    assert.equal(idx.hashes(), 0, 'every row freed once nothing is held');
  }
});
