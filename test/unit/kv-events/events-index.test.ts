// The exact events-fed index: membership per slot, the longest consecutive run per candidate stopping at the
// first missing block (as the engine's lookup does, holes included), bitmaps past 32 slots, freed ways, and
// a full index refusing an add, and the simulator's same-thread writer against the seqlocked one.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { EventsIndex } from '../../../src/registry/kv-events/events-index.ts';
import { rng } from '../router/xorshift.ts';

const chain = (n: number, base: number): Float64Array => Float64Array.from({ length: n }, (_, i) => base * 1_000_003 + i * 7919 + 1);

test('lookup: each candidate stops at its first missing block, a hole included', () => {
  const ix = new EventsIndex({ entries: 1024, slots: 8 });
  const h = chain(10, 1);
  for (const b of h) ix.add(0, b);
  h.forEach((b, i) => { if (i !== 4) ix.add(1, b); });
  for (const b of h.subarray(0, 2)) ix.add(2, b);
  const out = new Int32Array(4);
  assert.equal(ix.lookup(h, [0, 1, 2, 3], out), 10);
  assert.deepEqual([...out], [10, 4, 2, 0], 'slot 1 holds blocks 5-9 but not 4: the engine stops at 4');
  ix.remove(0, h[2]!);
  ix.lookup(h, [0, 1], out);
  assert.deepEqual([...out.subarray(0, 2)], [2, 4]);
  assert.equal(ix.holds(1, h[3]!), true);
  assert.equal(ix.holds(1, h[4]!), false);
});

test('bitmaps span several words: slots 5, 40 and 70 are told apart', () => {
  const ix = new EventsIndex({ entries: 256, slots: 96 });
  const h = chain(6, 2);
  for (const b of h) ix.add(40, b);
  for (const b of h.subarray(0, 3)) ix.add(70, b);
  const out = new Int32Array(3);
  ix.lookup(h, [5, 40, 70], out);
  assert.deepEqual([...out], [0, 6, 3]);
});

test('a way is freed when its last holder leaves; a full index refuses an add and counts it', () => {
  const ix = new EventsIndex({ entries: 8, slots: 2 }); // the minimum: 8 buckets of 8, 64 entries
  const h = chain(100, 3);
  let refused = 0;
  for (const b of h) if (!ix.add(0, b)) refused++;
  assert.ok(refused > 0, 'more hashes than entries');
  assert.equal(ix.overflows(), refused);
  assert.equal(ix.entries(), 100 - refused);
  for (const b of h) ix.remove(0, b);
  assert.equal(ix.entries(), 0, 'every way freed');
  assert.equal(ix.add(1, h[0]!), true);
});

test('a second view over the same buffer (another thread) sees the writer\'s state', () => {
  const ix = new EventsIndex({ entries: 64, slots: 4 });
  const reader = new EventsIndex(ix.buffer);
  const h = chain(3, 4);
  for (const b of h) ix.add(3, b);
  ix.setState(3, 1);
  const out = new Int32Array(1);
  assert.equal(reader.lookup(h, [3], out), 3);
  assert.equal(reader.isLive(3), true);
  assert.equal(reader.isLive(2), false);
});

test('hashes spilled past a full home bucket are found, removed and looked up after ways near home free up', () => {
  const ix = new EventsIndex({ entries: 64, slots: 2 }); // 8 buckets: hash 3 + 8k (high word 0) has home 3
  const h = Float64Array.from({ length: 21 }, (_, k) => 3 + 8 * k); // 8 in bucket 3, 8 in 4, 5 in 5
  for (const b of h) assert.equal(ix.add(0, b), true);
  for (const b of h) assert.equal(ix.holds(0, b), true, `hash ${b}`);
  const out = new Int32Array(2);
  assert.equal(ix.lookup(h, [0, 1], out), 21);
  for (const b of h.subarray(0, 8)) ix.remove(0, b); // bucket 3 empties; its reach stays
  assert.equal(ix.holds(0, h[20]!), true, 'still found two buckets past home');
  ix.add(1, h[20]!);
  assert.equal(ix.entries(), 13, 'a second holder joins the spilled entry, not a new way near home');
  ix.remove(0, h[19]!);
  assert.equal(ix.holds(0, h[19]!), false);
  const home4 = 4 + 8 * 100; // home 4, whose bucket the spill filled: placed in the first free way from there
  ix.add(1, home4);
  assert.equal(ix.holds(1, home4), true);
  assert.equal(ix.lookup(h.subarray(8), [0, 1], out), 11);
  assert.deepEqual([...out], [11, 0]);
});

test('a view with its writer on the same thread (sameThread, the simulator\'s) answers lookups as the seqlocked one', () => {
  const ix = new EventsIndex({ entries: 256, slots: 40 }, true);
  const seqlocked = new EventsIndex(ix.buffer);
  const h = chain(40, 3);
  // Enough hashes for spills past home buckets, holes, and removals.
  for (let s = 0; s < 40; s++) h.forEach((b, i) => { if ((i * 7 + s) % 11 !== 0 || i < s % 5) ix.add(s, b); });
  for (let s = 0; s < 40; s += 3) ix.remove(s, h[s % 40]!);
  const all = Array.from({ length: 40 }, (_, s) => s);
  const a = new Int32Array(40);
  const b = new Int32Array(40);
  assert.equal(ix.lookup(h, all, a), seqlocked.lookup(h, all, b));
  assert.deepEqual(a, b);
  for (let s = 0; s < 40; s++) assert.equal(ix.holds(s, h[7]!), seqlocked.holds(s, h[7]!));
});

test('the same-thread writer (plain stores) keeps the index the seqlocked writer keeps, through adds, removals, frees, spills and clears', () => {
  // A small index (64 entries over 8 buckets) so that ways fill, spill past their home, free and are reused.
  const plain = new EventsIndex({ entries: 64, slots: 40 }, true);
  const locked = new EventsIndex({ entries: 64, slots: 40 });
  const next = rng(7);
  const hashes = Float64Array.from({ length: 90 }, (_, i) => 5 + 8 * i + (i % 3) * 2 ** 33);
  const all = Array.from({ length: 40 }, (_, s) => s);
  const a = new Int32Array(40);
  const b = new Int32Array(40);
  for (let op = 0; op < 4000; op++) {
    const slot = Math.floor(next() * 40);
    const h = hashes[Math.floor(next() * hashes.length)]!;
    const r = next();
    if (r < 0.55) assert.equal(plain.add(slot, h), locked.add(slot, h), `add at op ${op}`);
    else if (r < 0.995) {
      plain.remove(slot, h);
      locked.remove(slot, h);
    } else {
      plain.clearSlot(slot);
      locked.clearSlot(slot);
    }
    if (op % 97 === 0) {
      assert.equal(plain.entries(), locked.entries(), `entries at op ${op}`);
      for (const x of hashes) for (let s = 0; s < 40; s += 13) assert.equal(plain.holds(s, x), locked.holds(s, x));
      assert.equal(plain.lookup(hashes, all, a), locked.lookup(hashes, all, b));
      assert.deepEqual(a, b);
    }
  }
  assert.equal(plain.overflows(), locked.overflows());
  assert.ok(plain.overflows() > 0 && plain.entries() > 0, 'the sequence filled the index and left entries in it');
});
