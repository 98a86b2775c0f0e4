// The KV block pool with vLLM V1's prefix cache (docs/vllm-facts.md "Block pool and eviction";
// vllm/v1/core/block_pool.py): every block preallocated, block 0 the reserved null block (usable =
// numBlocks − 1), a doubly linked free queue with the LRU block at the head, a hash → block map for full blocks, reference counts. Allocation pops
// the head and evicts its hash if it carries one; a prefix hit "touches" blocks (ref++ and out of the free
// queue); free appends hashed blocks to the tail in reverse order (a request's most specific blocks are
// evicted first) and puts hash-less blocks at the head (reused first), as current vLLM builds do.
// Thread: main of the mock process. Hot path: O(1) per block allocated, touched or freed; typed arrays only.
//
// The hash → block map is an open-addressing table over one typed array (linear probing, backward-shift
// deletion), sized once at twice the block count: a block holds at most one hash, so the table is never
// more than half full and never grows. A bucket's hash and block sit side by side (16 bytes), so a probe
// reads one cache line; the simulator's 40 engines of 27,648 blocks keep 40 MiB of tables, far past any
// cache. A Map keyed by 53-bit numbers boxes every key and rehashes as it fills; in the fleet simulator
// (millions of cache insertions and evictions) that was a third of all CPU and most of the garbage.
import { bucketOf53 as bucketOf } from '../../../src/util/fmix32.ts';

const NO_BLOCK = -1;

/**
 * What the prefix cache did, as vLLM's KV events report it: a hash entered the cache (BlockStored), or left
 * it because its block was reallocated (BlockRemoved). The KV-event publisher of the mock and the fleet
 * simulator's event feed listen here. One indirect call per cached or evicted block while a listener is set.
 */
export interface BlockPoolListener {
  stored(hash: number, blockId: number): void;
  removed(hash: number, blockId: number): void;
}


export class BlockPool {
  /** Including the null block 0. */
  readonly numBlocks: number;
  /**
   * The free queue's links, prev and next of a block side by side: taking the LRU block reads its next and
   * writes that block's prev, one cache line. Allocating a chunk follows this chain block by block, so it
   * stays in its own small array (8 bytes a block) rather than in a wider per-block record.
   */
  private readonly links: Int32Array;
  private readonly refCount: Int32Array;
  /** The block's cache key, NaN when the block is not in the prefix cache. */
  private readonly hashOf: Float64Array;
  private readonly inFreeQueue: Uint8Array;
  private head = NO_BLOCK;
  private tail = NO_BLOCK;
  private freeCount = 0;
  /** Prefix cache: table[2i] is a hash, table[2i + 1] its block (NO_BLOCK = empty bucket). */
  private readonly table: Float64Array;
  private readonly mask: number;
  private cacheCount = 0;
  /** Cached blocks evicted to make room (a counter for tests and the state page). */
  evictions = 0;
  /** Told of every hash stored in and removed from the prefix cache; null = nobody listens. */
  listener: BlockPoolListener | null = null;

  constructor(numBlocks: number) {
    if (!Number.isInteger(numBlocks) || numBlocks < 2) throw new RangeError(`numBlocks must be an integer >= 2, got ${numBlocks}`);
    this.numBlocks = numBlocks;
    this.links = new Int32Array(2 * numBlocks).fill(NO_BLOCK);
    this.refCount = new Int32Array(numBlocks);
    this.hashOf = new Float64Array(numBlocks).fill(NaN);
    this.inFreeQueue = new Uint8Array(numBlocks);
    let size = 16;
    while (size < 2 * numBlocks) size *= 2;
    this.table = new Float64Array(2 * size);
    for (let i = 1; i < 2 * size; i += 2) this.table[i] = NO_BLOCK;
    this.mask = size - 1;
    for (let id = 1; id < numBlocks; id++) this.appendTail(id);
  }

  /** Blocks a request can ever use: numBlocks − 1. */
  get usableBlocks(): number {
    return this.numBlocks - 1;
  }

  /** Blocks with ref count 0, cached or not: what allocation can take. */
  get freeBlocks(): number {
    return this.freeCount;
  }

  /** Blocks whose hash is in the prefix cache (referenced or not). */
  get cachedBlocks(): number {
    return this.cacheCount;
  }

  /** Referenced blocks / usable blocks: vLLM's kv_cache_usage_perc (cached-but-free blocks count as free). */
  usage(): number {
    return 1 - this.freeCount / this.usableBlocks;
  }

  /** The block holding `hash`, or −1. */
  lookup(hash: number): number {
    const mask = this.mask;
    const table = this.table;
    for (let i = bucketOf(hash, mask); ; i = (i + 1) & mask) {
      const v = table[2 * i + 1]!;
      if (v === NO_BLOCK || table[2 * i] === hash) return v;
    }
  }

  /**
   * Loads the bucket `hash` homes in and returns a word of it, to be discarded: calling this for the next
   * few blocks before caching them lets their cache misses overlap (a chunk caches hundreds of blocks into a
   * table far bigger than any cache). Changes nothing.
   */
  warm(hash: number): number {
    return this.table[2 * bucketOf(hash, this.mask) + 1]!;
  }

  refs(blockId: number): number {
    return this.refCount[blockId]!;
  }

  /** Takes a reference on a cached block found by lookup(); pulls it out of the free queue if it was free. */
  touch(blockId: number): void {
    if (this.refCount[blockId]++ === 0) this.unlink(blockId);
  }

  /** A fresh block with ref count 1, evicting the LRU free block's hash if it has one; −1 when none is free. */
  allocate(): number {
    const id = this.head;
    if (id === NO_BLOCK) return NO_BLOCK;
    this.unlink(id);
    const h = this.hashOf[id]!;
    if (!Number.isNaN(h)) {
      this.uncache(h, id);
      this.hashOf[id] = NaN;
      this.evictions++;
      this.listener?.removed(h, id);
    }
    this.refCount[id] = 1;
    return id;
  }

  /**
   * Registers a full block under `hash`. When another block already holds that hash (two requests computed
   * the same prefix at once), the map keeps the first and this block stays uncached, as in vLLM.
   */
  cacheBlock(blockId: number, hash: number): boolean {
    if (!Number.isNaN(this.hashOf[blockId]!)) return false;
    const mask = this.mask;
    const table = this.table;
    let i = bucketOf(hash, mask);
    for (; table[2 * i + 1] !== NO_BLOCK; i = (i + 1) & mask) if (table[2 * i] === hash) return false;
    table[2 * i] = hash;
    table[2 * i + 1] = blockId;
    this.cacheCount++;
    this.hashOf[blockId] = hash;
    this.listener?.stored(hash, blockId);
    return true;
  }

  /** Removes `hash` from the cache if `blockId` is the block holding it (backward-shift deletion). */
  private uncache(hash: number, blockId: number): void {
    const mask = this.mask;
    const table = this.table;
    let i = bucketOf(hash, mask);
    for (;;) {
      const v = table[2 * i + 1]!;
      if (v === NO_BLOCK) return;
      if (table[2 * i] === hash) break;
      i = (i + 1) & mask;
    }
    if (table[2 * i + 1] !== blockId) return;
    this.cacheCount--;
    // Shift later entries of the probe run back into the hole unless their home bucket lies after it.
    let hole = i;
    for (let j = (i + 1) & mask; table[2 * j + 1] !== NO_BLOCK; j = (j + 1) & mask) {
      const home = bucketOf(table[2 * j]!, mask);
      const between = hole <= j ? home > hole && home <= j : home > hole || home <= j;
      if (between) continue;
      table[2 * hole] = table[2 * j]!;
      table[2 * hole + 1] = table[2 * j + 1]!;
      hole = j;
    }
    table[2 * hole + 1] = NO_BLOCK;
  }

  /** Drops one reference on each of the first `count` of `blockIds` (all by default), walking them last to first. */
  free(blockIds: ArrayLike<number>, count = blockIds.length): void {
    for (let i = count - 1; i >= 0; i--) {
      const id = blockIds[i]!;
      const left = --this.refCount[id]!;
      if (left > 0) continue;
      if (left < 0) throw new Error(`block ${id} freed more often than referenced`);
      if (Number.isNaN(this.hashOf[id]!)) this.prependHead(id);
      else this.appendTail(id);
    }
  }

  /** The free queue from LRU (head) to MRU (tail); for tests. */
  freeQueue(): number[] {
    const out: number[] = [];
    for (let id = this.head; id !== NO_BLOCK; id = this.links[id * 2 + 1]!) out.push(id);
    return out;
  }

  private appendTail(id: number): void {
    this.links[id * 2] = this.tail;
    this.links[id * 2 + 1] = NO_BLOCK;
    if (this.tail === NO_BLOCK) this.head = id;
    else this.links[this.tail * 2 + 1] = id;
    this.tail = id;
    this.inFreeQueue[id] = 1;
    this.freeCount++;
  }

  private prependHead(id: number): void {
    this.links[id * 2 + 1] = this.head;
    this.links[id * 2] = NO_BLOCK;
    if (this.head === NO_BLOCK) this.tail = id;
    else this.links[this.head * 2] = id;
    this.head = id;
    this.inFreeQueue[id] = 1;
    this.freeCount++;
  }

  private unlink(id: number): void {
    if (this.inFreeQueue[id] === 0) throw new Error(`block ${id} is not in the free queue`);
    const p = this.links[id * 2]!;
    const n = this.links[id * 2 + 1]!;
    if (p === NO_BLOCK) this.head = n;
    else this.links[p * 2 + 1] = n;
    if (n === NO_BLOCK) this.tail = p;
    else this.links[n * 2] = p;
    this.links[id * 2] = NO_BLOCK;
    this.links[id * 2 + 1] = NO_BLOCK;
    this.inFreeQueue[id] = 0;
    this.freeCount--;
  }
}
