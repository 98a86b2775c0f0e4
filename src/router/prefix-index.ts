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
// Memory, per entry: hash (2 × u32) + recency (u32) + 4 holders (u16 slot+1) + 4 stamps (u32) = 36 bytes,
// plus the bucket's version word (4 bytes per 8 entries): 36.5 bytes. 1,048,576 entries = 38.3 MB.

/** Holders per hash: a hot prefix spread by the load bound sits on a few replicas, rarely more than four. */
export const HOLDERS = 4;
export const WAYS = 8;
/** A capacity above this is clamped; purgeSlot jumps a counter by more, so no old stamp survives a purge. */
export const MAX_CAPACITY_BLOCKS = 1 << 24;
const PURGE_JUMP = MAX_CAPACITY_BLOCKS + 1;
const DEFAULT_CAPACITY_BLOCKS = 16_384;
const READ_ATTEMPTS = 4;
const TWO_POW_32 = 2 ** 32;
const VALID = 0x80000000;

// Header, Int32 words.
const H_MAGIC = 0;
const H_SLOTS = 1;
const H_BUCKETS = 2;
const H_ENTRIES = 3;
const H_EVICTIONS = 4;
const H_TICK = 5;
const HEADER_I32 = 8;
const MAGIC = 0x50524658; // 'PRFX'

// Bucket layout, in 32-bit words from the bucket's base: struct-of-arrays, so a probe reads the 8 low hash
// words from one cache line before touching anything else.
const B_VERSION = 0;
const B_LO = 1;
const B_HI = B_LO + WAYS;
const B_RECENCY = B_HI + WAYS;
const B_HOLDERS = B_RECENCY + WAYS; // WAYS × HOLDERS u16 = 16 words
const B_STAMPS = B_HOLDERS + (WAYS * HOLDERS) / 2;
const BUCKET_I32 = B_STAMPS + WAYS * HOLDERS; // 73

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
      this.buffer = new SharedArrayBuffer((HEADER_I32 + 2 * slots + buckets * BUCKET_I32) * 4);
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
    this.bucketBase = HEADER_I32 + 2 * this.slots;
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

  /**
   * Longest run of consecutive blocks from block 0 that each candidate holds, written to out[i] for
   * candidates[i] (out must be at least as long). Returns the longest over all candidates.
   */
  lookup(hashes: Float64Array, candidates: readonly number[], out: Int32Array): number {
    const nc = candidates.length;
    const pos = this.posOf;
    for (let i = 0; i < nc; i++) {
      out[i] = 0;
      pos[candidates[i]!] = i;
    }
    const i32 = this.i32;
    const u32 = this.u32;
    const u16 = this.u16;
    const n = hashes.length;
    let b = 0;
    for (; b < n; b++) {
      const h = hashes[b]!;
      const lo = h >>> 0;
      const hiTag = (((h - lo) / TWO_POW_32) | VALID) >>> 0;
      const base = this.bucketBase + ((lo ^ Math.imul(hiTag, 0x9e3779b1)) & this.mask) * BUCKET_I32;
      let s0 = 0; let s1 = 0; let s2 = 0; let s3 = 0;
      let t0 = 0; let t1 = 0; let t2 = 0; let t3 = 0;
      for (let attempt = 0; attempt < READ_ATTEMPTS; attempt++) {
        const v1 = Atomics.load(i32, base + B_VERSION);
        if ((v1 & 1) !== 0) continue;
        let way = -1;
        for (let w = 0; w < WAYS; w++) {
          if (u32[base + B_LO + w] === lo && u32[base + B_HI + w] === hiTag) { way = w; break; }
        }
        if (way < 0) break;
        const hp = (base + B_HOLDERS) * 2 + way * HOLDERS;
        const sp = base + B_STAMPS + way * HOLDERS;
        s0 = u16[hp]!; s1 = u16[hp + 1]!; s2 = u16[hp + 2]!; s3 = u16[hp + 3]!;
        t0 = u32[sp]!; t1 = u32[sp + 1]!; t2 = u32[sp + 2]!; t3 = u32[sp + 3]!;
        if (Atomics.load(i32, base + B_VERSION) === v1) break;
        s0 = 0; s1 = 0; s2 = 0; s3 = 0;
      }
      let advanced = this.extend(s0, t0, b, out) | this.extend(s1, t1, b, out);
      advanced |= this.extend(s2, t2, b, out) | this.extend(s3, t3, b, out);
      if (advanced === 0) break;
    }
    let best = 0;
    for (let i = 0; i < nc; i++) {
      pos[candidates[i]!] = -1;
      if (out[i]! > best) best = out[i]!;
    }
    return best;
  }

  /** Holder `s` (slot+1, 0 = none) with stamp `t` extends its candidate's run from `b` to b+1. */
  private extend(s: number, t: number, b: number, out: Int32Array): number {
    if (s === 0) return 0;
    const p = this.posOf[s - 1]!;
    if (p < 0 || out[p] !== b || !this.live(s - 1, t)) return 0;
    out[p] = b + 1;
    return 1;
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
    const tag = slot + 1;
    for (let b = from; b < hashes.length; b++) {
      const h = hashes[b]!;
      const lo = h >>> 0;
      const hiTag = (((h - lo) / TWO_POW_32) | VALID) >>> 0;
      const base = this.bucketBase + ((lo ^ Math.imul(hiTag, 0x9e3779b1)) & this.mask) * BUCKET_I32;
      const v = Atomics.load(i32, base + B_VERSION);
      if ((v & 1) !== 0 || Atomics.compareExchange(i32, base + B_VERSION, v, v + 1) !== v) continue;
      let way = -1;
      for (let w = 0; w < WAYS; w++) {
        if (u32[base + B_LO + w] === lo && u32[base + B_HI + w] === hiTag) { way = w; break; }
      }
      if (way < 0) way = this.claimWay(base, tick, lo, hiTag);
      const hp = (base + B_HOLDERS) * 2 + way * HOLDERS;
      const sp = base + B_STAMPS + way * HOLDERS;
      let k = -1;
      for (let j = 0; j < HOLDERS; j++) if (u16[hp + j] === tag) { k = j; break; }
      if (k < 0 || !this.live(slot, u32[sp + k]!)) {
        if (k < 0) k = this.victimHolder(hp, sp);
        u16[hp + k] = tag;
        added++;
      }
      u32[sp + k] = start;
      u32[base + B_RECENCY + way] = tick;
      Atomics.store(i32, base + B_VERSION, v + 2);
    }
    if (added > 0) Atomics.add(i32, this.counterBase + slot, added);
    return added;
  }

  /** Inside a held bucket: a way for a new hash (empty, else all holders evicted, else least recent). */
  private claimWay(base: number, tick: number, lo: number, hiTag: number): number {
    const u32 = this.u32;
    const u16 = this.u16;
    let way = -1;
    let dead = -1;
    let oldest = -1;
    let oldestAge = -1;
    for (let w = 0; w < WAYS; w++) {
      if (u32[base + B_HI + w] === 0) { way = w; break; }
      if (dead < 0) {
        const hp = (base + B_HOLDERS) * 2 + w * HOLDERS;
        const sp = base + B_STAMPS + w * HOLDERS;
        let alive = false;
        for (let j = 0; j < HOLDERS && !alive; j++) {
          const s = u16[hp + j]!;
          alive = s !== 0 && this.live(s - 1, u32[sp + j]!);
        }
        if (!alive) dead = w;
      }
      const age = (tick - u32[base + B_RECENCY + w]!) >>> 0;
      if (age > oldestAge) { oldestAge = age; oldest = w; }
    }
    if (way >= 0) Atomics.add(this.i32, H_ENTRIES, 1);
    else if (dead >= 0) way = dead;
    else {
      way = oldest;
      Atomics.add(this.i32, H_EVICTIONS, 1);
    }
    u32[base + B_LO + way] = lo;
    u32[base + B_HI + way] = hiTag;
    const hp = (base + B_HOLDERS) * 2 + way * HOLDERS;
    for (let j = 0; j < HOLDERS; j++) u16[hp + j] = 0;
    return way;
  }

  /** Inside a held bucket: the holder to replace (empty, else evicted, else the nearest to its eviction). */
  private victimHolder(hp: number, sp: number): number {
    let victim = 0;
    let worst = -1;
    for (let j = 0; j < HOLDERS; j++) {
      const s = this.u16[hp + j]!;
      if (s === 0) return j;
      const age = (this.i32[this.counterBase + s - 1]! - this.u32[sp + j]!) >>> 0;
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
    const u32 = this.u32;
    const u16 = this.u16;
    const tag = slot + 1;
    let dropped = 0;
    for (let b = from < 0 ? 0 : from; b < hashes.length; b++) {
      const h = hashes[b]!;
      const lo = h >>> 0;
      const hiTag = (((h - lo) / TWO_POW_32) | VALID) >>> 0;
      const base = this.bucketBase + ((lo ^ Math.imul(hiTag, 0x9e3779b1)) & this.mask) * BUCKET_I32;
      let v = -1;
      for (let attempt = 0; attempt < 64; attempt++) {
        const seen = Atomics.load(i32, base + B_VERSION);
        if ((seen & 1) === 0 && Atomics.compareExchange(i32, base + B_VERSION, seen, seen + 1) === seen) { v = seen; break; }
      }
      if (v === -1) continue;
      for (let w = 0; w < WAYS; w++) {
        if (u32[base + B_LO + w] !== lo || u32[base + B_HI + w] !== hiTag) continue;
        const hp = (base + B_HOLDERS) * 2 + w * HOLDERS;
        let left = 0;
        for (let j = 0; j < HOLDERS; j++) {
          if (u16[hp + j] === tag) { u16[hp + j] = 0; dropped++; } else if (u16[hp + j] !== 0) left++;
        }
        if (left === 0) {
          u32[base + B_HI + w] = 0;
          u32[base + B_LO + w] = 0;
          Atomics.sub(i32, H_ENTRIES, 1);
        }
        break;
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
