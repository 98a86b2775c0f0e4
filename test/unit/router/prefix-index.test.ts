// PrefixIndex: longest consecutive prefix per candidate, forgetting by per-replica capacity, correction
// (truncate), purge on restart, approximate-LRU bucket replacement, and a second thread writing the shared
// buffer while this one reads.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnWorker } from '../../../src/util/spawn-worker.ts';
import { HOLDERS, PrefixIndex, PREFIX_INDEX_BYTES_PER_ENTRY, WAYS } from '../../../src/router/prefix-index.ts';
import { chainFor, type WriterData } from './prefix-index-thread.ts';

function chain(seed: number, blocks: number): Float64Array {
  const out = new Float64Array(blocks);
  let h = seed;
  for (let b = 0; b < blocks; b++) {
    h = (h * 48271 + 0x1234567) % 2 ** 53;
    out[b] = h;
  }
  return out;
}

function lookup(index: PrefixIndex, hashes: Float64Array, candidates: number[]): number[] {
  const out = new Int32Array(candidates.length);
  index.lookup(hashes, candidates, out);
  return [...out];
}

void test('lookup gives each candidate the run of consecutive blocks it holds from block 0', () => {
  const index = new PrefixIndex({ entries: 4096, slots: 8 });
  const a = chain(1, 20);
  index.insert(a, 0, 2);
  index.insert(a.subarray(0, 12), 0, 5);
  index.insert(a, 0, 7);
  index.truncate(7, a, 3);
  index.insert(a.subarray(0, 17), 0, 6); // a run ending one block into the second stride
  assert.deepEqual(lookup(index, a, [0, 2, 5, 7, 6]), [0, 20, 12, 3, 17]);
  const out = new Int32Array(3);
  assert.equal(index.lookup(a.subarray(0, 8), [5, 2, 7], out), 8, 'returns the longest run');
  assert.deepEqual([...out], [8, 8, 3]);
  assert.deepEqual(lookup(index, chain(99, 5), [2, 5]), [0, 0], 'an unknown prefix matches nothing');
  assert.deepEqual(lookup(index, new Float64Array(0), [2]), [0]);
  assert.equal(index.entries(), 20);
});

void test('a block past the replica capacity of newer blocks reads as evicted, as the engine LRU drops it', () => {
  const index = new PrefixIndex({ entries: 4096, slots: 2 });
  index.setCapacity(0, 10);
  const first = chain(1, 8);
  assert.equal(index.insert(first, 0, 0), 8);
  assert.deepEqual(lookup(index, first, [0]), [8]);
  assert.equal(index.insert(first, 0, 0), 0, 'blocks already held are refreshed, not stored again');
  index.insert(chain(2, 5), 0, 0);
  assert.deepEqual(lookup(index, first, [0]), [8], '13 blocks stored, but the refresh made `first` 5 blocks old');
  index.insert(chain(3, 5), 0, 0);
  assert.deepEqual(lookup(index, first, [0]), [0], '10 newer blocks: gone, as a whole chain');
  assert.deepEqual(lookup(index, chain(3, 5), [0]), [5]);
  index.setCapacity(0, 100);
  assert.deepEqual(lookup(index, first, [0]), [8], 'a larger capacity (num_gpu_blocks learned) keeps them');
  assert.equal(index.capacity(1), 16_384, 'the default until a scrape says');
});

void test('truncate drops the replica membership past the reported point and leaves other holders', () => {
  const index = new PrefixIndex({ entries: 4096, slots: 4 });
  const a = chain(3, 10);
  index.insert(a, 0, 1);
  index.insert(a, 0, 3);
  assert.equal(index.truncate(1, a, 4), 6);
  assert.deepEqual(lookup(index, a, [1, 3]), [4, 10]);
  index.truncate(3, a, 0);
  assert.deepEqual(lookup(index, a, [1, 3]), [4, 0]);
  assert.equal(index.entries(), 4, 'entries with no holder left are freed');
});

void test('purgeSlot forgets everything the slot held at once, and the slot learns again afterwards', () => {
  const index = new PrefixIndex({ entries: 4096, slots: 4 });
  const a = chain(4, 30);
  index.insert(a, 0, 0);
  index.insert(a, 0, 1);
  index.purgeSlot(0);
  assert.deepEqual(lookup(index, a, [0, 1]), [0, 30]);
  index.insert(a.subarray(0, 5), 0, 0);
  assert.deepEqual(lookup(index, a, [0, 1]), [5, 30]);
  index.purgeSlot(0);
  index.purgeSlot(0);
  assert.deepEqual(lookup(index, a, [0]), [0], 'repeated purges never revive old stamps');
});

void test('a full bucket replaces a way whose holders are evicted first, else its least recently used way', () => {
  const index = new PrefixIndex({ entries: WAYS, slots: 4 }); // one bucket: every hash collides
  assert.equal(index.capacityEntries, WAYS);
  const hs = chain(5, WAYS + 2);
  const one = (i: number): Float64Array => hs.subarray(i, i + 1);
  for (let i = 0; i < WAYS; i++) index.insert(one(i), 0, i === 3 ? 2 : 0);
  index.insert(one(0), 0, 0); // touch way 0: now way 1 is the oldest
  index.insert(one(WAYS), 0, 1);
  assert.equal(index.evictions(), 1);
  assert.deepEqual(lookup(index, one(0), [0]), [1], 'the recently touched hash stays');
  assert.deepEqual(lookup(index, one(1), [0]), [0], 'the least recently used hash was replaced');
  assert.deepEqual(lookup(index, one(WAYS), [1]), [1]);
  index.purgeSlot(2); // hash 3 now has no live holder
  index.insert(one(WAYS + 1), 0, 1);
  assert.equal(index.evictions(), 1, 'reusing a dead way is not an eviction');
  assert.deepEqual(lookup(index, one(2), [0]), [1], 'the LRU way was spared');
  assert.deepEqual(lookup(index, one(WAYS + 1), [1]), [1]);
  assert.equal(index.entries(), WAYS);
});

void test('sixteen replicas holding one hash are all credited; a seventeenth replaces the one closest to its own eviction', () => {
  const slots = HOLDERS + 2;
  const index = new PrefixIndex({ entries: 4096, slots });
  const a = chain(6, 1);
  for (let s = 0; s < slots; s++) index.setCapacity(s, 100);
  index.insert(chain(7, 60), 0, 2); // slot 2's copy of `a` will be the most aged relative to its capacity
  for (let s = 0; s < HOLDERS; s++) index.insert(a, 0, s);
  const all = Array.from({ length: HOLDERS + 1 }, (_, s) => s);
  assert.deepEqual(lookup(index, a, all), [...Array<number>(HOLDERS).fill(1), 0], 'every one of the sixteen holders is credited');
  index.insert(chain(8, 50), 0, 2);
  index.insert(a, 0, HOLDERS);
  assert.deepEqual(lookup(index, a, all), all.map((s) => (s === 2 ? 0 : 1)), 'the seventeenth displaced slot 2, nearest its eviction');
});

void test('another thread attaches to the buffer; while it writes, a reader never sees a holder it never wrote', async (t) => {
  const index = new PrefixIndex({ entries: WAYS, slots: 4 }); // one bucket: constant replacement and contention
  const chains = [0, 1, 2, 3].map((s) => chainFor(s, 6));
  const control = new SharedArrayBuffer(4);
  const stop = new Int32Array(control);
  const data: WriterData = { indexBuffer: index.buffer, control, chains };
  const worker = spawnWorker(new URL('./prefix-index-thread.ts', import.meta.url), { workerData: data });
  t.after(async () => {
    Atomics.store(stop, 0, 1);
    await worker.terminate();
  });
  let onReady!: () => void;
  const ready = new Promise<void>((r) => { onReady = r; });
  const ops = new Promise<number>((resolve, reject) => {
    worker.on('message', (m: number | 'ready') => (m === 'ready' ? onReady() : resolve(m)));
    worker.on('error', reject);
  });
  await ready;
  const out = new Int32Array(4);
  const candidates = [0, 1, 2, 3];
  let reads = 0;
  let hits = 0;
  const until = Date.now() + 800;
  while (Date.now() < until) {
    for (let s = 0; s < 4; s++) {
      index.lookup(chains[s]!, candidates, out);
      for (let t = 0; t < 4; t++) if (t !== s) assert.equal(out[t], 0, `slot ${t} never holds chain ${s}`);
      if (out[s]! > 0) hits++;
      reads++;
    }
  }
  Atomics.store(stop, 0, 1);
  const written = await ops;
  assert.ok(written > 1000, `the writer ran (${written} operations)`);
  assert.ok(hits > 0 && hits < reads, `the reader saw the writer's work come and go (${hits}/${reads})`);
  const attached = new PrefixIndex(index.buffer);
  assert.equal(attached.buckets, index.buckets);
  assert.ok(attached.entries() <= attached.capacityEntries);
});

void test('memory per entry is 136 bytes', () => {
  assert.equal(PREFIX_INDEX_BYTES_PER_ENTRY, 136);
  const index = new PrefixIndex({ entries: 1 << 20, slots: 256 });
  assert.ok(index.buffer.byteLength < (1 << 20) * 136 + 4096);
});
