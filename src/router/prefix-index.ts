// The prefix index: block hash → the replicas believed to hold that KV block in their prefix cache, shared by
// every acceptor thread through one SharedArrayBuffer (the constructor takes an entry count, or the buffer of
// an index another thread built). Written at dispatch (speculative), extended by a reply's blocks, corrected
// when a replica reports fewer cached tokens than predicted, purged for a replica that restarted or left.
// Thread: any. Hot path: lookup() once per decision and insert() once per dispatch; O(blocks), no allocation.
//
// Bounded: `entries` ways in set-associative buckets of WAYS; a new hash replaces an empty way, else a way
// whose holders are all evicted, else the way with the oldest recency tick (approximate LRU).
// Capacity-aware: each slot has a wrapping block counter that advances by one per block newly stored there;
// a membership's stamp is the counter when it was (re)stored (a hit refreshes it, as the engine's LRU does). Once `counter − stamp ≥ capacity` (the
// replica's num_gpu_blocks) the engine's own LRU would have dropped the block, so it reads as evicted.
// purgeSlot jumps the counter past any capacity: O(1), every old stamp of the slot reads as evicted.
// Lock-free: per-bucket version word. A writer CASes it even→odd, writes, stores even+2; a busy bucket is
// skipped (one block of one request is not learned). A reader retries a torn read and then calls it a miss.
//
// Memory, per entry: 136 bytes (hash 6, recency 4, 16 holders × u16 slot+1, 16 stamps × u32, padding to keep
// a way on two whole cache lines, and the bucket's version word). 1,048,576 entries = 136 MiB. Why sixteen
// holders: prefix-index-layout.ts.

import {
  B_LO, B_TAG16, B_VERSION, B_WAYS, BUCKET_I32, bucketBaseOf, H_BUCKETS, H_ENTRIES, H_EVICTIONS, H_MAGIC, H_SLOTS, H_TICK, HEADER_I32,
  HOLDERS, MAGIC, TAG_VALID, W_HOLDERS, W_RECENCY, W_STAMPS, WAY_I32, WAYS,
} from './prefix-index-layout.ts';

export { HOLDERS, WAYS } from './prefix-index-layout.ts';
/** A capacity above this is clamped; purgeSlot jumps a counter by more, so no old stamp survives a purge. */
export const MAX_CAPACITY_BLOCKS = 1 << 24;
const PURGE_JUMP = MAX_CAPACITY_BLOCKS + 1;
const DEFAULT_CAPACITY_BLOCKS = 16_384;
const READ_ATTEMPTS = 4;
/** lookup() probes the last block of each stride of this many blocks, and walks only the stride a run ends in. */
export const LOOKUP_STRIDE = 16;
const TWO_POW_32 = 2 ** 32;
/** insert() loads this many buckets ahead at once (see there). */
const PREFETCH = 8;

export const PREFIX_INDEX_BYTES_PER_ENTRY = (BUCKET_I32 * 4) / WAYS;

export interface PrefixIndexOptions {
  /** Entries (rounded up to a power-of-two number of buckets of WAYS). */
  entries: number;
  /** Replica slots (registry.max_replicas). */
  slots: number;
  /** Capacity assumed for a slot until setCapacity gives its num_gpu_blocks. */
  defaultCapacityBlocks?: number;
}

export class PrefixIndex {
  readonly buffer: SharedArrayBuffer;
  readonly slots: number;
  readonly buckets: number;
  private readonly i32: Int32Array;
  private readonly u32: Uint32Array;
  private readonly u16: Uint16Array;
  private readonly mask: number;
  /** Word offsets of the per-slot counters and capacities. */
  private readonly counterBase: number;
  private readonly capacityBase: number;
  private readonly bucketBase: number;
  /** Per thread: slot → position in the candidate list during one lookup; -1 otherwise. */
  private readonly posOf: Int32Array;
  /** The last probe's hash split (fields, so probe() returns one number and allocates nothing). */
  private lo = 0;
  private tag = 0;
  /** Keeps the prefetching loads observable so the compiler cannot drop them. */
  sink = 0;
  /** The last readHolders(): holders (slot+1, 0 = none) and their stamps; per thread, reused by every lookup. */
  private readonly hs = new Uint16Array(HOLDERS);
  private readonly ht = new Uint32Array(HOLDERS);
  /** lookup(): per holder of a stride's last block, the candidate position its run reached, or -1. */
  private readonly reachedAt = new Int32Array(HOLDERS);

  constructor(optsOrBuffer: PrefixIndexOptions | SharedArrayBuffer) {
    if (optsOrBuffer instanceof SharedArrayBuffer) {
      this.buffer = optsOrBuffer;
      const h = new Int32Array(optsOrBuffer, 0, HEADER_I32);
      if (h[H_MAGIC] !== MAGIC) throw new Error('not a prefix index buffer');
      this.slots = h[H_SLOTS]!;
      this.buckets = h[H_BUCKETS]!;
    } else {
      const { entries, slots } = optsOrBuffer;
      if (!(slots > 0 && slots < 65535)) throw new RangeError('prefix index: slots must be 1..65534');
      let buckets = 1;
      while (buckets * WAYS < entries) buckets *= 2;
      this.slots = slots;
      this.buckets = buckets;
      this.buffer = new SharedArrayBuffer((bucketBaseOf(slots) + buckets * BUCKET_I32) * 4);
      const h = new Int32Array(this.buffer, 0, HEADER_I32);
      h[H_SLOTS] = slots;
      h[H_BUCKETS] = buckets;
      const cap = clampCapacity(optsOrBuffer.defaultCapacityBlocks ?? DEFAULT_CAPACITY_BLOCKS);
      new Int32Array(this.buffer, (HEADER_I32 + slots) * 4, slots).fill(cap);
      Atomics.store(h, H_MAGIC, MAGIC);
    }
    this.i32 = new Int32Array(this.buffer);
    this.u32 = new Uint32Array(this.buffer);
    this.u16 = new Uint16Array(this.buffer);
    this.mask = this.buckets - 1;
    this.counterBase = HEADER_I32;
    this.capacityBase = HEADER_I32 + this.slots;
    this.bucketBase = bucketBaseOf(this.slots);
    this.posOf = new Int32Array(this.slots).fill(-1);
  }

  /** Ways in the index (its bound). */
  get capacityEntries(): number {
    return this.buckets * WAYS;
  }

  /** Occupied ways (some may hold only evicted memberships until reused). */
  entries(): number {
    return Atomics.load(this.i32, H_ENTRIES);
  }

  /** Live entries replaced by another hash (approximate-LRU evictions). */
  evictions(): number {
    return Atomics.load(this.i32, H_EVICTIONS) >>> 0;
  }

  /** The slot's replica holds this many KV blocks in all (num_gpu_blocks). */
  setCapacity(slot: number, blocks: number): void {
    const c = clampCapacity(blocks);
    if (this.i32[this.capacityBase + slot] !== c) Atomics.store(this.i32, this.capacityBase + slot, c);
  }

  capacity(slot: number): number {
    return this.i32[this.capacityBase + slot]!;
  }

  /** Splits hash `h` into this.lo and this.tag and returns its bucket's base word. */
  private probe(h: number): number {
    const lo = h >>> 0;
    const hi = (h - lo) / TWO_POW_32;
    this.lo = lo;
    this.tag = (hi & 0x7fff) | TAG_VALID;
    return this.bucketBase + ((lo ^ Math.imul(hi, 0x9e3779b1)) & this.mask) * BUCKET_I32;
  }

  /** The way in the bucket at `base` holding this.lo / this.tag, or -1. */
  private findWay(base: number): number {
    const u32 = this.u32;
    const u16 = this.u16;
    const lo = this.lo;
    const tag = this.tag;
    const tp = (base + B_TAG16) * 2;
    for (let w = 0; w < WAYS; w++) {
      if (u32[base + B_LO + w] === lo && u16[tp + w] === tag) return w;
    }
    return -1;
  }

  /**
   * Longest run of consecutive blocks from block 0 that each candidate holds, written to out[i] for
   * candidates[i] (out must be at least as long). Returns the longest over all candidates.
   *
   * Strided: what the index writes is prefix-closed per replica (chains are inserted from block 0, one
   * insert's blocks share a stamp and a later insert refreshes a prefix, so age evicts a chain from its tail;
   * truncate drops a suffix), so a candidate that holds the last block of a stride of LOOKUP_STRIDE holds the
   * stride. Only the stride where a candidate's run ends is walked block by block. Cost: n / 16 probes plus up
   * to 16 per stride in which some run ends. A hole the index itself made inside a run (a bucket's LRU
   * replaced one block, a fifth holder displaced this one) is stepped over: the engine still holds that block.
   */
  lookup(hashes: Float64Array, candidates: readonly number[], out: Int32Array): number {
    const nc = candidates.length;
    const pos = this.posOf;
    for (let i = 0; i < nc; i++) {
      out[i] = 0;
      pos[candidates[i]!] = i;
    }
    const n = hashes.length;
    const u32 = this.u32;
    let alive = nc;
    let touch = 0;
    for (let s0 = 0; s0 < n && alive > 0; s0 += LOOKUP_STRIDE) {
      const end = s0 + LOOKUP_STRIDE < n ? s0 + LOOKUP_STRIDE : n;
      // Start loading the next stride's bucket now: its cache miss overlaps this stride's work.
      if (end + LOOKUP_STRIDE - 1 < n) touch ^= u32[this.probe(hashes[end + LOOKUP_STRIDE - 1]!) + B_LO]!;
      this.readHolders(hashes[end - 1]!);
      const hs = this.hs;
      const ht = this.ht;
      const at = this.reachedAt;
      let reached = 0;
      for (let j = 0; j < HOLDERS; j++) {
        const p = this.reach(hs[j]!, ht[j]!, s0, -end, out);
        at[j] = p;
        if (p >= 0) reached++;
      }
      if (reached < alive) {
        for (let b = s0; b < end - 1; b++) {
          this.readHolders(hashes[b]!);
          let moved = 0;
          for (let j = 0; j < HOLDERS; j++) if (this.reach(hs[j]!, ht[j]!, b, b + 1, out) >= 0) moved++;
          if (moved === 0) break;
        }
      }
      for (let j = 0; j < HOLDERS; j++) if (at[j]! >= 0) out[at[j]!] = end;
      alive = reached;
    }
    this.sink = touch;
    let best = 0;
    for (let i = 0; i < nc; i++) {
      pos[candidates[i]!] = -1;
      if (out[i]! > best) best = out[i]!;
    }
    return best;
  }

  /** Holders and stamps of hash `h` into this.hs / this.ht (holders all 0 on a miss or a torn read). */
  private readHolders(h: number): void {
    const i32 = this.i32;
    const u32 = this.u32;
    const u16 = this.u16;
    const base = this.probe(h);
    const hs = this.hs;
    const ht = this.ht;
    hs.fill(0);
    for (let attempt = 0; attempt < READ_ATTEMPTS; attempt++) {
      const v1 = Atomics.load(i32, base + B_VERSION);
      if ((v1 & 1) !== 0) continue;
      const way = this.findWay(base);
      if (way < 0) return;
      const wb = base + B_WAYS + way * WAY_I32;
      const hp = (wb + W_HOLDERS) * 2;
      const st = wb + W_STAMPS;
      for (let j = 0; j < HOLDERS; j++) {
        hs[j] = u16[hp + j]!;
        ht[j] = u32[st + j]!;
      }
      if (Atomics.load(i32, base + B_VERSION) === v1) return;
      hs.fill(0);
    }
  }

  /** Holder `s` (slot+1, 0 = none) with stamp `t`: if its candidate's run stands at `at`, set it to `to` and
   * return the candidate's position; else -1. */
  private reach(s: number, t: number, at: number, to: number, out: Int32Array): number {
    if (s === 0) return -1;
    const p = this.posOf[s - 1]!;
    if (p < 0 || out[p] !== at || !this.live(s - 1, t)) return -1;
    out[p] = to;
    return p;
  }

  private live(slot: number, stamp: number): boolean {
    return ((this.i32[this.counterBase + slot]! - stamp) >>> 0) < this.i32[this.capacityBase + slot]!;
  }

  /**
   * The slot now holds hashes[from..] (dispatched there, or a finished reply's blocks). Blocks it already
   * holds are refreshed; new ones advance its block counter. Returns the blocks newly stored.
   */
  insert(hashes: Float64Array, from: number, slot: number): number {
    const i32 = this.i32;
    const u32 = this.u32;
    const u16 = this.u16;
    const tick = (Atomics.add(i32, H_TICK, 1) + 1) >>> 0;
    // Every block of one insert gets the counter as it was before it: one request's blocks age together (a
    // chain is evicted as a whole, never from block 0 up), their age starting at the blocks it stored.
    const start = i32[this.counterBase + slot]! >>> 0;
    let added = 0;
    const holder = slot + 1;
    const n = hashes.length;
    let touch = 0;
    for (let b = from; b < n; b++) {
      // Every PREFETCH blocks, load the next PREFETCH buckets' five lines together (tags, then the first two
      // ways' holder and stamp lines, where a bucket not yet full keeps its hashes; findWay and the holder
      // update read them): the bucket lock below is a locked instruction, which
      // waits for outstanding loads, so misses taken one block at a time never overlap. Loads only; which
      // blocks are written, and how, is unchanged.
      if ((b - from) % PREFETCH === 0) {
        const end = b + PREFETCH < n ? b + PREFETCH : n;
        for (let p = b + 1; p < end; p++) {
          const pb = this.probe(hashes[p]!);
          touch ^= u32[pb + B_LO]! ^ u32[pb + B_WAYS]! ^ u32[pb + B_WAYS + 16]! ^ u32[pb + B_WAYS + 32]! ^ u32[pb + B_WAYS + 48]!;
        }
      }
      const base = this.probe(hashes[b]!);
      const v = Atomics.load(i32, base + B_VERSION);
      if ((v & 1) !== 0 || Atomics.compareExchange(i32, base + B_VERSION, v, v + 1) !== v) continue;
      let way = this.findWay(base);
      if (way < 0) way = this.claimWay(base, tick);
      const wb = base + B_WAYS + way * WAY_I32;
      const hp = (wb + W_HOLDERS) * 2;
      let k = -1;
      for (let j = 0; j < HOLDERS; j++) if (u16[hp + j] === holder) { k = j; break; }
      if (k < 0 || !this.live(slot, u32[wb + W_STAMPS + k]!)) {
        if (k < 0) k = this.victimHolder(wb);
        u16[hp + k] = holder;
        added++;
      }
      u32[wb + W_STAMPS + k] = start;
      u32[wb + W_RECENCY] = tick;
      Atomics.store(i32, base + B_VERSION, v + 2);
    }
    this.sink = touch;
    if (added > 0) Atomics.add(i32, this.counterBase + slot, added);
    return added;
  }

  /** Inside a held bucket: a way for the probed hash (empty, else all holders evicted, else least recent). */
  private claimWay(base: number, tick: number): number {
    const u32 = this.u32;
    const u16 = this.u16;
    const tp = (base + B_TAG16) * 2;
    let way = -1;
    let dead = -1;
    let oldest = -1;
    let oldestAge = -1;
    for (let w = 0; w < WAYS; w++) {
      if (u16[tp + w] === 0) { way = w; break; }
      const wb = base + B_WAYS + w * WAY_I32;
      if (dead < 0) {
        let alive = false;
        for (let j = 0; j < HOLDERS && !alive; j++) {
          const s = u16[(wb + W_HOLDERS) * 2 + j]!;
          alive = s !== 0 && this.live(s - 1, u32[wb + W_STAMPS + j]!);
        }
        if (!alive) dead = w;
      }
      const age = (tick - u32[wb + W_RECENCY]!) >>> 0;
      if (age > oldestAge) { oldestAge = age; oldest = w; }
    }
    if (way >= 0) Atomics.add(this.i32, H_ENTRIES, 1);
    else if (dead >= 0) way = dead;
    else {
      way = oldest;
      Atomics.add(this.i32, H_EVICTIONS, 1);
    }
    u32[base + B_LO + way] = this.lo;
    u16[tp + way] = this.tag;
    const hp = (base + B_WAYS + way * WAY_I32 + W_HOLDERS) * 2;
    for (let j = 0; j < HOLDERS; j++) u16[hp + j] = 0;
    return way;
  }

  /** Inside a held bucket: the holder to replace in the way at `wb` (empty, else evicted, else the nearest to
   * its eviction relative to its replica's capacity). */
  private victimHolder(wb: number): number {
    let victim = 0;
    let worst = -1;
    for (let j = 0; j < HOLDERS; j++) {
      const s = this.u16[(wb + W_HOLDERS) * 2 + j]!;
      if (s === 0) return j;
      const age = (this.i32[this.counterBase + s - 1]! - this.u32[wb + W_STAMPS + j]!) >>> 0;
      const cap = this.i32[this.capacityBase + s - 1]!;
      if (age >= cap) return j;
      const fraction = age / cap;
      if (fraction > worst) { worst = fraction; victim = j; }
    }
    return victim;
  }

  /**
   * Correction: the slot reported fewer cached tokens than predicted, so it does not hold hashes[from..]
   * as far as the index can tell; drop its membership there. A busy bucket is waited for briefly (a
   * correction is rarer and worth more than one speculative insert). Returns memberships dropped.
   */
  truncate(slot: number, hashes: Float64Array, from: number): number {
    const i32 = this.i32;
    const u16 = this.u16;
    const holder = slot + 1;
    let dropped = 0;
    for (let b = from < 0 ? 0 : from; b < hashes.length; b++) {
      const base = this.probe(hashes[b]!);
      let v = -1;
      for (let attempt = 0; attempt < 64; attempt++) {
        const seen = Atomics.load(i32, base + B_VERSION);
        if ((seen & 1) === 0 && Atomics.compareExchange(i32, base + B_VERSION, seen, seen + 1) === seen) { v = seen; break; }
      }
      if (v === -1) continue;
      const w = this.findWay(base);
      if (w >= 0) {
        const hp = (base + B_WAYS + w * WAY_I32 + W_HOLDERS) * 2;
        let left = 0;
        for (let j = 0; j < HOLDERS; j++) {
          if (u16[hp + j] === holder) { u16[hp + j] = 0; dropped++; } else if (u16[hp + j] !== 0) left++;
        }
        if (left === 0) {
          u16[(base + B_TAG16) * 2 + w] = 0;
          this.u32[base + B_LO + w] = 0;
          Atomics.sub(i32, H_ENTRIES, 1);
        }
      }
      Atomics.store(i32, base + B_VERSION, v + 2);
    }
    return dropped;
  }

  /** The slot's replica restarted empty or left: every membership it has reads as evicted from now on. */
  purgeSlot(slot: number): void {
    Atomics.add(this.i32, this.counterBase + slot, PURGE_JUMP);
  }
}

function clampCapacity(blocks: number): number {
  if (!(blocks >= 1)) return 1;
  return blocks > MAX_CAPACITY_BLOCKS ? MAX_CAPACITY_BLOCKS : Math.floor(blocks);
}
