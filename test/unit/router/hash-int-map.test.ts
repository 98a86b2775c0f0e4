// The anchors' hash → integer table against a Map doing the same operations: random inserts, overwrites,
// counts moved up and down (a count reaching 0 or below is removed) and deletes, over keys that share
// buckets (half of them differ only in their high 21 bits), so that probe runs wrap and backward-shift
// deletion moves entries, through several doublings.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { HashIntMap } from '../../../src/router/anchors/hash-int-map.ts';
import { rng } from './xorshift.ts';


void test('get/set/putIfAbsent/adjust/delete agree with a Map through growth and wrapped probe runs', () => {
  const r = rng(7);
  const keys: number[] = [];
  for (let i = 0; i < 3000; i++) keys.push(i % 2 === 0 ? Math.floor(r() * 2 ** 21) * 2 ** 32 : Math.floor(r() * 2 ** 53));
  const t = new HashIntMap();
  const m = new Map<number, number>();
  for (let step = 0; step < 60_000; step++) {
    const k = keys[Math.floor(r() * (step < 20_000 ? 300 : keys.length))]!;
    const op = r();
    if (op < 0.35) {
      const v = Math.floor(r() * 1e6);
      t.set(k, v);
      m.set(k, v);
    } else if (op < 0.45) {
      const v = Math.floor(r() * 1e6);
      assert.equal(t.putIfAbsent(k, v), m.get(k) ?? -1);
      if (!m.has(k)) m.set(k, v);
    } else if (op < 0.6) {
      const d = Math.floor(r() * 7) - 3;
      const want = (m.get(k) ?? 0) + d;
      assert.equal(t.adjust(k, d), want);
      if (want > 0) m.set(k, want);
      else m.delete(k);
    } else if (op < 0.85) {
      assert.equal(t.delete(k), m.delete(k));
    } else {
      assert.equal(t.get(k), m.get(k) ?? -1);
    }
    assert.equal(t.size, m.size);
  }
  for (const k of keys) assert.equal(t.get(k), m.get(k) ?? -1, `key ${k}`);
  const seen = new Map<number, number>();
  t.forEach((k, v) => seen.set(k, v));
  assert.deepEqual([...seen].sort((a, b) => a[0] - b[0]), [...m].sort((a, b) => a[0] - b[0]));
  t.clear();
  assert.equal(t.size, 0);
  for (const k of keys) assert.equal(t.get(k), -1);
});
