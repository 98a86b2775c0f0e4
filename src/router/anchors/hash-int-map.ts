// A map from 53-bit block hashes to non-negative integers: open addressing over typed arrays (linear probing,
// backward-shift deletion), doubled when half full. The anchors' per-replica tables (block-holders.ts: hash →
// membership; dynamo-sequences.ts: hash → active requests sharing it) live in these. A V8 Map keyed by
// numbers past the Smi range boxes every key and hashes it through a heap number; with millions of stores,
// evictions and lookups per simulated run (Mooncake: ~1,000 blocks a prompt, 40 replicas) that was a fifth
// of the simulator's CPU and much of its garbage.
// Thread: any one (not shared). Hot path: get/set/delete O(1) expected, no allocation except when growing.
import { bucketOf53 as bucketOf } from '../../util/fmix32.ts';

const EMPTY = -1;
const MIN_SIZE = 16;


export class HashIntMap {
  private keys: Float64Array;
  /** vals[i] ≥ 0: keys[i] maps to it; EMPTY: a free bucket. */
  private vals: Int32Array;
  private mask: number;
  private count = 0;

  constructor(initialSize = MIN_SIZE) {
    let size = MIN_SIZE;
    while (size < initialSize) size *= 2;
    this.keys = new Float64Array(size);
    this.vals = new Int32Array(size).fill(EMPTY);
    this.mask = size - 1;
  }

  get size(): number {
    return this.count;
  }

  /** The value of `hash`, or −1. */
  get(hash: number): number {
    const mask = this.mask;
    const vals = this.vals;
    for (let i = bucketOf(hash, mask); ; i = (i + 1) & mask) {
      const v = vals[i]!;
      if (v === EMPTY || this.keys[i] === hash) return v;
    }
  }

  /** `hash` maps to `value` (≥ 0) from now on. */
  set(hash: number, value: number): void {
    const mask = this.mask;
    const vals = this.vals;
    let i = bucketOf(hash, mask);
    for (; vals[i] !== EMPTY; i = (i + 1) & mask) {
      if (this.keys[i] === hash) {
        vals[i] = value;
        return;
      }
    }
    this.keys[i] = hash;
    vals[i] = value;
    if (++this.count * 2 > vals.length) this.grow();
  }

  /** `hash`'s value if present; else `hash` maps to `value` (≥ 0) from now on and −1 is returned. One probe. */
  putIfAbsent(hash: number, value: number): number {
    const mask = this.mask;
    const vals = this.vals;
    let i = bucketOf(hash, mask);
    for (; vals[i] !== EMPTY; i = (i + 1) & mask) if (this.keys[i] === hash) return vals[i]!;
    this.keys[i] = hash;
    vals[i] = value;
    if (++this.count * 2 > vals.length) this.grow();
    return EMPTY;
  }

  /** Adds `delta` to `hash`'s value (0 if absent); a result ≤ 0 removes it. Returns the result. */
  adjust(hash: number, delta: number): number {
    const mask = this.mask;
    const vals = this.vals;
    let i = bucketOf(hash, mask);
    for (; vals[i] !== EMPTY; i = (i + 1) & mask) {
      if (this.keys[i] === hash) {
        const v = vals[i]! + delta;
        if (v > 0) vals[i] = v;
        else this.removeAt(i);
        return v;
      }
    }
    if (delta > 0) {
      this.keys[i] = hash;
      vals[i] = delta;
      if (++this.count * 2 > vals.length) this.grow();
    }
    return delta;
  }

  /** Removes `hash`; true when it was there. */
  delete(hash: number): boolean {
    const mask = this.mask;
    const keys = this.keys;
    const vals = this.vals;
    let i = bucketOf(hash, mask);
    for (;;) {
      if (vals[i] === EMPTY) return false;
      if (keys[i] === hash) break;
      i = (i + 1) & mask;
    }
    this.removeAt(i);
    return true;
  }

  /** Empties bucket i (occupied), keeping every later entry of its probe run reachable. */
  private removeAt(i: number): void {
    const mask = this.mask;
    const keys = this.keys;
    const vals = this.vals;
    this.count--;
    // Shift later entries of the probe run back into the hole unless their home bucket lies after it.
    let hole = i;
    for (let j = (i + 1) & mask; vals[j] !== EMPTY; j = (j + 1) & mask) {
      const home = bucketOf(keys[j]!, mask);
      const between = hole <= j ? home > hole && home <= j : home > hole || home <= j;
      if (between) continue;
      keys[hole] = keys[j]!;
      vals[hole] = vals[j]!;
      hole = j;
    }
    vals[hole] = EMPTY;
  }

  clear(): void {
    this.vals.fill(EMPTY);
    this.count = 0;
  }

  /** Calls fn(hash, value) for every entry, in table order. */
  forEach(fn: (hash: number, value: number) => void): void {
    for (let i = 0; i < this.vals.length; i++) if (this.vals[i] !== EMPTY) fn(this.keys[i]!, this.vals[i]!);
  }

  private grow(): void {
    const oldKeys = this.keys;
    const oldVals = this.vals;
    const size = oldVals.length * 2;
    this.keys = new Float64Array(size);
    this.vals = new Int32Array(size).fill(EMPTY);
    this.mask = size - 1;
    const mask = this.mask;
    for (let j = 0; j < oldVals.length; j++) {
      const v = oldVals[j]!;
      if (v === EMPTY) continue;
      const k = oldKeys[j]!;
      let i = bucketOf(k, mask);
      while (this.vals[i] !== EMPTY) i = (i + 1) & mask;
      this.keys[i] = k;
      this.vals[i] = v;
    }
  }
}
