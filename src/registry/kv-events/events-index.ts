// The exact prefix index fed by vLLM's KV events: gateway block hash → the set of replicas (slots) whose
// prefix cache holds that block, as their engines reported it, plus each slot's stream state (events live or
// fallen back to the approximate index) and its counters for /metrics. One SharedArrayBuffer: the kv-events
// worker is its only writer; acceptor threads and the main thread read it.
// Thread: writer = the kv-events worker; readers = any. Hot path: lookup() once per routing decision (only
// for candidates whose stream is live), O(longest match) probes, no allocation.
//
// Layout: set-associative buckets of WAYS hashes, each way with a bitmap of ceil(slots / 32) words. A hash
// lives in one of PROBE (8) consecutive buckets from its home bucket (the first with a free way when added).
// A bucket's first 64-byte line holds its seqlock, its reach, which ways are taken and the WAYS low hash
// words; each way's high word and bitmap follow, side by side. A miss (most KV events for new blocks, a
// lookup's last block) reads that one line, a hit one more: with the high words and bitmaps in separate runs
// and the reach last, every probe of a 40-slot fleet read three lines (a fifth of a seed-mix run's CPU was the
// index's cache misses).
// Each bucket also keeps the farthest any hash whose home it is was ever placed (its reach: 0 while none
// spilled over, which at the index's sizing is nearly always), so a hit or a miss reads reach + 1 buckets, not
// PROBE: a KV event for a new hash and a lookup's final miss cost one bucket instead of eight. The reach never
// shrinks (a clear leaves it), so a reader can never stop short of an entry. Full (all PROBE buckets full): the add fails, the
// caller counts an overflow and that replica falls back to the approximate index until its next clear.
// Per-bucket seqlock (single writer, no CAS): odd while written; a reader retries a torn read, then calls it
// a miss. A way whose bitmap empties is freed.
//
// Exact lookup: each candidate's longest run of consecutive blocks from block 0, as the engine's own
// get_computed_blocks stops at the first miss; one walk for all candidates (the bitmap AND the candidates'
// mask), ending when no candidate is left. Unlike the approximate index there is no stride trick: the engine
// may hold block k + 1 without block k, and the prediction must stop where the engine stops.

import {
  B_LO, B_REACH, B_TAKEN, B_VERSION, B_WAYS, CHECK_I32, FULL_MASK, H_BUCKETS, H_ENTRIES, H_MAGIC, H_OVERFLOWS, H_SLOTS, H_WORDS,
  HEADER_I32, MAGIC, STATS_F64, StreamState, VALID, WAYS, FallbackReason, FALLBACK_REASONS, type FallbackReasonName,
  type StreamStateValue,
} from './events-index-layout.ts';

export { CHECK_I32, FALLBACK_REASONS, FallbackReason, Stat, StreamState, WAYS } from './events-index-layout.ts';
export type { FallbackReasonName, StreamStateValue } from './events-index-layout.ts';

const PROBE = 8;
const READ_ATTEMPTS = 4;
const TWO_POW_32 = 2 ** 32;

export interface EventsIndexOptions {
  /** Hash entries (rounded up to a power-of-two number of buckets of WAYS). */
  entries: number;
  /** Replica slots (registry.max_replicas). */
  slots: number;
}

export class EventsIndex {
  readonly buffer: SharedArrayBuffer;
  readonly slots: number;
  readonly buckets: number;
  /** Bitmap words per way. */
  readonly words: number;
  private readonly i32: Int32Array;
  private readonly f64: Float64Array;
  private readonly bucketI32: number;
  /** Int32 words per way after B_WAYS: its high word and its bitmap. */
  private readonly wayI32: number;
  private readonly mask: number;
  private readonly stateBase: number;
  private readonly reasonBase: number;
  private readonly statBase: number;
  private readonly bucketBase: number;
  /** Int32 offset of the per-slot prediction-check words (prediction-drift.ts owns their meaning). */
  readonly checkBase: number;
  // Per-thread scratch for lookups.
  private readonly posOf: Int32Array;
  private readonly want: Int32Array;
  private readonly bits: Int32Array;
  private lo = 0;
  private hi = 0;
  /** Writer and readers on this one thread (the simulator's runs): no seqlock, plain loads and stores where
   *  Atomics calls (which V8 does not inline) guarded readers on other threads. The live gateway's writer is
   *  the kv-events worker: false. */
  private readonly sameThread: boolean;

  constructor(optsOrBuffer: EventsIndexOptions | SharedArrayBuffer, sameThread = false) {
    this.sameThread = sameThread;
    let slots: number;
    let buckets: number;
    if (optsOrBuffer instanceof SharedArrayBuffer) {
      const h = new Int32Array(optsOrBuffer, 0, HEADER_I32);
      if (h[H_MAGIC] !== MAGIC) throw new Error('not a KV-events index buffer');
      slots = h[H_SLOTS]!;
      buckets = h[H_BUCKETS]!;
      this.buffer = optsOrBuffer;
    } else {
      slots = optsOrBuffer.slots;
      if (!(slots > 0 && slots <= 65536)) throw new RangeError('events index: slots must be 1..65536');
      buckets = PROBE;
      while (buckets * WAYS < optsOrBuffer.entries) buckets *= 2;
      this.buffer = new SharedArrayBuffer(0); // replaced below once the layout is known
    }
    this.slots = slots;
    this.buckets = buckets;
    this.words = Math.ceil(slots / 32);
    this.wayI32 = 1 + this.words;
    this.bucketI32 = Math.ceil((B_WAYS + WAYS * this.wayI32) / 16) * 16;
    this.stateBase = HEADER_I32;
    this.reasonBase = this.stateBase + slots;
    // Float64 stats start 8-byte aligned, then buckets 64-byte aligned.
    const statI32 = Math.ceil((this.reasonBase + slots) / 2) * 2;
    this.statBase = statI32 / 2;
    this.bucketBase = Math.ceil((statI32 + slots * STATS_F64 * 2) / 16) * 16;
    this.checkBase = this.bucketBase + buckets * this.bucketI32;
    if (!(optsOrBuffer instanceof SharedArrayBuffer)) {
      this.buffer = new SharedArrayBuffer((this.checkBase + slots * CHECK_I32) * 4);
      const h = new Int32Array(this.buffer, 0, HEADER_I32);
      h[H_SLOTS] = slots;
      h[H_BUCKETS] = buckets;
      h[H_WORDS] = this.words;
      Atomics.store(h, H_MAGIC, MAGIC);
    }
    this.i32 = new Int32Array(this.buffer);
    this.f64 = new Float64Array(this.buffer);
    this.mask = buckets - 1;
    this.posOf = new Int32Array(slots).fill(-1);
    this.want = new Int32Array(this.words);
    this.bits = new Int32Array(this.words);
  }

  /** Bytes per hash entry (the bucket's share of the buffer). */
  get bytesPerEntry(): number {
    return (this.bucketI32 * 4) / WAYS;
  }

  get capacityEntries(): number {
    return this.buckets * WAYS;
  }

  /** Occupied hash entries. */
  entries(): number {
    return Atomics.load(this.i32, H_ENTRIES);
  }

  /** Adds refused because every bucket a hash may live in was full. */
  overflows(): number {
    return Atomics.load(this.i32, H_OVERFLOWS);
  }

  state(slot: number): StreamStateValue {
    return this.i32[this.stateBase + slot] as StreamStateValue;
  }

  /** The slot's lookups are answered here (events flowing, index exact). Plain load: a word never tears. */
  isLive(slot: number): boolean {
    return this.i32[this.stateBase + slot] === StreamState.Live;
  }

  reason(slot: number): FallbackReasonName | null {
    const r = this.i32[this.reasonBase + slot]!;
    return r === 0 ? null : FALLBACK_REASONS[r - 1]!;
  }

  stat(slot: number, field: number): number {
    return this.f64[this.statBase + slot * STATS_F64 + field]!;
  }

  // ---- writer side (the kv-events worker only) ----

  setState(slot: number, state: StreamStateValue, reason: number = FallbackReason.None): void {
    if (reason !== FallbackReason.None) this.i32[this.reasonBase + slot] = reason;
    Atomics.store(this.i32, this.stateBase + slot, state);
  }

  addStat(slot: number, field: number, by = 1): void {
    this.f64[this.statBase + slot * STATS_F64 + field] += by;
  }

  setStat(slot: number, field: number, value: number): void {
    this.f64[this.statBase + slot * STATS_F64 + field] = value;
  }

  /** Zeroes a slot's counters (a new occupant of the slot). */
  resetStats(slot: number): void {
    this.f64.fill(0, this.statBase + slot * STATS_F64, this.statBase + (slot + 1) * STATS_F64);
    this.i32[this.reasonBase + slot] = 0;
  }

  private split(h: number): number {
    const lo = h >>> 0;
    const hi = (h - lo) / TWO_POW_32;
    this.lo = lo | 0;
    this.hi = (hi | VALID) | 0;
    return (lo ^ Math.imul(hi, 0x9e3779b1)) & this.mask;
  }

  private bucketAt(home: number, p: number): number {
    return this.bucketBase + ((home + p) & this.mask) * this.bucketI32;
  }

  /** Where the way of `w` in the bucket at `base` starts (its high word; its bitmap follows). */
  private wayAt(base: number, w: number): number {
    return base + B_WAYS + w * this.wayI32;
  }

  /** The way of this.lo/this.hi in the bucket at `base`, or -1. The high word (a second line) only on a low match. */
  private wayIn(base: number): number {
    const i32 = this.i32;
    const lo = this.lo;
    for (let w = 0; w < WAYS; w++) if (i32[base + B_LO + w] === lo && i32[this.wayAt(base, w)] === this.hi) return w;
    return -1;
  }

  /** Marks `slot` as holding `hash`. False when the index is full for this hash (nothing changed). */
  add(slot: number, hash: number): boolean {
    const i32 = this.i32;
    const home = this.split(hash);
    const homeBase = this.bucketAt(home, 0);
    const reach = i32[homeBase + B_REACH]!;
    let freeBase = -1;
    let freeWay = -1;
    let freeP = -1;
    // Buckets past the reach cannot hold the hash: past it, only the first free way is sought.
    for (let p = 0; p < PROBE && (p <= reach || freeBase < 0); p++) {
      const base = this.bucketAt(home, p);
      if (p <= reach) {
        const w = this.wayIn(base);
        if (w >= 0) {
          this.setBit(base, w, slot, true);
          return true;
        }
      }
      if (freeBase < 0) {
        const taken = i32[base + B_TAKEN]!;
        if (taken !== FULL_MASK) {
          freeBase = base;
          freeWay = 31 - Math.clz32(~taken & (taken + 1));
          freeP = p;
        }
      }
    }
    if (freeBase < 0) {
      Atomics.add(i32, H_OVERFLOWS, 1);
      return false;
    }
    const way = this.wayAt(freeBase, freeWay);
    const same = this.sameThread;
    // No reader on another thread (sameThread): no seqlock to bump, plain stores (Atomics calls are not inlined).
    const v = i32[freeBase + B_VERSION]!;
    if (!same) Atomics.store(i32, freeBase + B_VERSION, v + 1);
    i32[freeBase + B_TAKEN] = i32[freeBase + B_TAKEN]! | (1 << freeWay);
    i32[freeBase + B_LO + freeWay] = this.lo;
    i32[way] = this.hi;
    for (let k = 1; k <= this.words; k++) i32[way + k] = 0;
    i32[way + 1 + (slot >>> 5)] = 1 << (slot & 31);
    if (same) {
      if (freeP > reach) i32[homeBase + B_REACH] = freeP;
      i32[H_ENTRIES]++;
      return true;
    }
    Atomics.store(i32, freeBase + B_VERSION, v + 2);
    // Widened after the entry is written: a reader that sees the new reach finds the entry.
    if (freeP > reach) Atomics.store(i32, homeBase + B_REACH, freeP);
    Atomics.add(i32, H_ENTRIES, 1);
    return true;
  }

  /** `slot` no longer holds `hash`. */
  remove(slot: number, hash: number): void {
    const home = this.split(hash);
    const reach = this.i32[this.bucketAt(home, 0) + B_REACH]!;
    for (let p = 0; p <= reach; p++) {
      const base = this.bucketAt(home, p);
      const w = this.wayIn(base);
      if (w >= 0) {
        this.setBit(base, w, slot, false);
        return;
      }
    }
  }

  private setBit(base: number, way: number, slot: number, on: boolean): void {
    const i32 = this.i32;
    const bw = this.wayAt(base, way) + 1;
    const word = bw + (slot >>> 5);
    const bit = 1 << (slot & 31);
    const next = on ? i32[word]! | bit : i32[word]! & ~bit;
    if (next === i32[word]) return;
    const same = this.sameThread;
    const v = i32[base + B_VERSION]!;
    if (!same) Atomics.store(i32, base + B_VERSION, v + 1);
    i32[word] = next;
    let empty = !on;
    for (let k = 0; k < this.words && empty; k++) if (i32[bw + k] !== 0) empty = false;
    if (empty) {
      i32[bw - 1] = 0;
      i32[base + B_LO + way] = 0;
      i32[base + B_TAKEN] = i32[base + B_TAKEN]! & ~(1 << way);
    }
    if (same) {
      if (empty) i32[H_ENTRIES]--;
      return;
    }
    Atomics.store(i32, base + B_VERSION, v + 2);
    if (empty) Atomics.sub(i32, H_ENTRIES, 1);
  }

  /** Drops every membership of `slot` (a new subscription, whatever an earlier one left): one pass over the buckets. */
  clearSlot(slot: number): void {
    const i32 = this.i32;
    const word = slot >>> 5;
    const bit = 1 << (slot & 31);
    for (let b = 0; b < this.buckets; b++) {
      const base = this.bucketBase + b * this.bucketI32;
      for (let w = 0; w < WAYS; w++) {
        if ((i32[base + B_TAKEN]! & (1 << w)) !== 0 && (i32[this.wayAt(base, w) + 1 + word]! & bit) !== 0) this.setBit(base, w, slot, false);
      }
    }
  }

  // ---- reader side ----

  /** Copies the holders bitmap of `hash` into this.bits; false on a miss (or a read torn every time). */
  private readBits(hash: number): boolean {
    const i32 = this.i32;
    const home = this.split(hash);
    const words = this.words;
    const reachAt = this.bucketAt(home, 0) + B_REACH;
    const reach = this.sameThread ? i32[reachAt]! : Atomics.load(i32, reachAt);
    for (let p = 0; p <= reach; p++) {
      const base = this.bucketAt(home, p);
      for (let attempt = 0; attempt < READ_ATTEMPTS; attempt++) {
        const v1 = this.sameThread ? 0 : Atomics.load(i32, base + B_VERSION);
        if ((v1 & 1) !== 0) continue;
        const w = this.wayIn(base);
        if (w >= 0) {
          const bw = this.wayAt(base, w) + 1;
          for (let k = 0; k < words; k++) this.bits[k] = i32[bw + k]!;
        }
        if (!this.sameThread && Atomics.load(i32, base + B_VERSION) !== v1) continue;
        if (w >= 0) return true;
        break; // a consistent miss in this bucket: try the next one
      }
    }
    return false;
  }

  /** Whether `slot` holds `hash` (tests and tools). */
  holds(slot: number, hash: number): boolean {
    return this.readBits(hash) && (this.bits[slot >>> 5]! & (1 << (slot & 31))) !== 0;
  }

  /**
   * Longest run of consecutive blocks from block 0 that each candidate holds, into out[i] for candidates[i].
   * Returns the longest. Call with the candidates whose stream isLive().
   */
  lookup(hashes: Float64Array, candidates: readonly number[], out: Int32Array): number {
    const nc = candidates.length;
    const want = this.want;
    const bits = this.bits;
    const words = this.words;
    const pos = this.posOf;
    want.fill(0);
    for (let i = 0; i < nc; i++) {
      const s = candidates[i]!;
      pos[s] = i;
      want[s >>> 5] = want[s >>> 5]! | (1 << (s & 31));
    }
    let left = nc;
    const n = hashes.length;
    let b = 0;
    for (; b < n && left > 0; b++) {
      if (!this.readBits(hashes[b]!)) bits.fill(0);
      for (let k = 0; k < words; k++) {
        let gone = want[k]! & ~bits[k]!;
        if (gone === 0) continue;
        want[k] = want[k]! & ~gone;
        while (gone !== 0) {
          const low = gone & -gone;
          const s = (k << 5) + 31 - Math.clz32(low);
          out[pos[s]!] = b;
          left--;
          gone ^= low;
        }
      }
    }
    // Candidates still standing hold every block.
    for (let k = 0; k < words; k++) {
      let rest = want[k]!;
      while (rest !== 0) {
        const low = rest & -rest;
        out[pos[(k << 5) + 31 - Math.clz32(low)]!] = n;
        rest ^= low;
      }
    }
    let best = 0;
    for (let i = 0; i < nc; i++) {
      pos[candidates[i]!] = -1;
      if (out[i]! > best) best = out[i]!;
    }
    return best;
  }
}
