import { before, test } from 'node:test';
import assert from 'node:assert/strict';
import { blockHashes, blockHashesOfParts, initBlockHasher } from '../../../src/tokenize/block-hash.ts';
import { seededRandom } from './corpus.ts';

void before(async () => {
  await initBlockHasher();
});

function randomTokens(seed: number, n: number): Uint32Array {
  const random = seededRandom(seed);
  return Uint32Array.from({ length: n }, () => Math.floor(random() * 128256));
}

void test('one hash per full block; a trailing partial block is not hashed', () => {
  const tokens = randomTokens(1, 16 * 5 + 7);
  assert.equal(blockHashes(tokens, 16, null).length, 5);
  assert.equal(blockHashes(tokens.subarray(0, 15), 16, null).length, 0);
  assert.equal(blockHashes(tokens.subarray(0, 16), 16, null).length, 1);
  // The partial block's tokens do not influence any hash.
  const other = tokens.slice();
  other[16 * 5 + 3] = 42;
  assert.deepEqual(blockHashes(other, 16, null), blockHashes(tokens, 16, null));
});

void test('values are non-negative integers below 2^53 and distinct across blocks', () => {
  const hashes = blockHashes(randomTokens(2, 16 * 200), 16, 'acme-sql');
  for (const h of hashes) assert.ok(Number.isSafeInteger(h) && h >= 0, String(h));
  assert.equal(new Set(hashes).size, hashes.length);
});

void test('same prefix gives the same leading hashes; the first differing block and all after it differ', () => {
  const a = randomTokens(3, 16 * 10);
  const b = a.slice();
  b[16 * 6 + 9] = (b[16 * 6 + 9] as number) + 1;
  const ha = blockHashes(a, 16, null);
  const hb = blockHashes(b, 16, null);
  assert.deepEqual(ha.subarray(0, 6), hb.subarray(0, 6));
  for (let i = 6; i < 10; i++) assert.notEqual(ha[i], hb[i], `block ${i}`);
});

void test('chained: equal blocks at different positions or after different parents hash differently', () => {
  const block = randomTokens(4, 16);
  const twice = new Uint32Array(32);
  twice.set(block, 0);
  twice.set(block, 16);
  const h = blockHashes(twice, 16, null);
  assert.notEqual(h[0], h[1]);
});

void test('a different adapter (extra key) changes every hash; null differs from any name', () => {
  const tokens = randomTokens(5, 16 * 8);
  const base = blockHashes(tokens, 16, null);
  const sql = blockHashes(tokens, 16, 'acme-sql');
  const support = blockHashes(tokens, 16, 'acme-support');
  for (let i = 0; i < 8; i++) {
    assert.notEqual(base[i], sql[i]);
    assert.notEqual(sql[i], support[i]);
  }
  assert.deepEqual(blockHashes(tokens, 16, 'acme-sql'), sql);
});

void test('deterministic, and a chain can be continued from its last value', () => {
  const tokens = randomTokens(6, 16 * 12);
  const whole = blockHashes(tokens, 16, 'x');
  assert.deepEqual(blockHashes(Array.from(tokens), 16, 'x'), whole);
  const head = blockHashes(tokens.subarray(0, 16 * 5), 16, 'x');
  const tail = blockHashes(tokens.subarray(16 * 5), 16, 'x', head[4] as number);
  assert.deepEqual([...head, ...tail], [...whole]);
});

void test('block size is part of the key', () => {
  const tokens = randomTokens(7, 64);
  assert.equal(blockHashes(tokens, 32, null).length, 2);
  assert.notEqual(blockHashes(tokens, 32, null)[0], blockHashes(tokens, 16, null)[1]);
  assert.throws(() => blockHashes(tokens, 0, null), RangeError);
});

void test('pinned values: the gateway and the mock must agree across versions', () => {
  const tokens = Uint32Array.from({ length: 32 }, (_, i) => i * 1000);
  // If this changes, every replica's prefix index and every recorded fixture changes with it.
  assert.deepEqual(Array.from(blockHashes(tokens, 16, null)), PINNED_NULL);
  assert.deepEqual(Array.from(blockHashes(tokens, 16, 'acme-sql')), PINNED_SQL);
});

const PINNED_NULL = [2135392964149394, 2921530660371003];
const PINNED_SQL = [1160467752474835, 4920549167892037];

void test('hashing across parts equals hashing their concatenation, for any split, start block and chain', () => {
  const random = seededRandom(77);
  for (let trial = 0; trial < 200; trial++) {
    const all = randomTokens(1000 + trial, Math.floor(random() * 200));
    // Cut into 1-6 parts, some empty, at random points (not block-aligned).
    const cuts = Array.from({ length: Math.floor(random() * 6) }, () => Math.floor(random() * (all.length + 1))).sort((a, b) => a - b);
    const parts: Uint32Array[] = [];
    let at = 0;
    for (const c of [...cuts, all.length]) {
      parts.push(all.subarray(at, c));
      at = c;
    }
    const bs = [1, 3, 16][trial % 3]!;
    const adapter = trial % 4 === 0 ? 'acme-sql' : null;
    const whole = blockHashes(all, bs, adapter);
    assert.deepEqual(Array.from(blockHashesOfParts(parts, 0, bs, adapter)), Array.from(whole), `trial ${trial}: from 0`);
    // Continuing from block k with the hash of block k-1 gives the tail of the same chain.
    const k = whole.length === 0 ? 0 : Math.floor(random() * (whole.length + 1));
    const tail = blockHashesOfParts(parts, k * bs, bs, adapter, k === 0 ? null : whole[k - 1]!);
    assert.deepEqual(Array.from(tail), Array.from(whole.subarray(k)), `trial ${trial}: from block ${k}`);
  }
});
