// The comparison policies' own prefix index: block hash → the set of replicas believed to hold that block,
// with no bound on the holders of one hash, and per replica an LRU of its blocks bounded by a capacity in
// blocks. Two ways to feed it, as upstream routers do:
//   - written at dispatch (approximate): every prompt block is stored for the chosen replica, most recent
//     last, and the replica's LRU drops its oldest block once it holds more than its capacity. This is llm-d's
//     approximate prefix index (llm-d/llm-d-router pkg/epp/framework/plugins/requestcontrol/dataproducer/
//     approximateprefix: a set of pods per hash, an LRU of hashes per pod sized from the scraped
//     num_gpu_blocks) and SGLang's tree with its own size bound;
//   - fed by KV events (precise): stored / removed / cleared as the engine's prefix cache reports them, with
//     no capacity (the engine's own evictions arrive as removals). This is llm-d's kv-cache indexer and
//     Dynamo's KvIndexer (ai-dynamo/dynamo lib/kv-router/src/radix_tree.rs).
// Unlike prefix-index.ts (4 holders per hash, shared between acceptor threads through a SharedArrayBuffer),
// this is one thread's: per slot, an open-addressing table from hash to its membership (hash-int-map.ts);
// memberships in growable typed arrays, linked in a per-slot LRU. The per-slot tables answer holds() and find
// a membership for the LRU, eviction and removal in one probe however many replicas hold the hash (a prefix
// every replica has cached has 40 holders on the 8B pool). Beside them, each hash's holders as a bitmap over
// slots (one more table, hash → row; a row is ceil(slots/32) Int32 words and a holder count, freed with its
// hash when the count reaches 0), kept in step by store() of a new membership and by drop(), which every
// other way out goes through (eviction, remove(), clearSlot(), the holder cap). lookup() walks the blocks
// once: one probe of that table per block, and ceil(slots/32) words ANDed with the candidates still running,
// until none is left (Σ over candidates of (run + 1) probes before: up to 40 × ~100 per decision). The cost:
// one more probe per new membership, one (two for a hash's last) per dropped one, and per hash with a
// holder a bucket of that table (12 bytes, the table at most half full: 24-48 bytes) plus 4 × (ceil(slots/32)
// + 1) bytes of row: 12 on 40 slots, in arrays doubled as they grow.
// With a holder cap (llm-d's precise index: kvblock.InMemoryIndexConfig.PodCacheSize, default 10 pods per
// block key, llm-d-kv-cache pkg/kvcache/kvblock/in_memory.go), each hash also keeps its holders in an LRU
// of that many: an eleventh replica storing it makes the index forget the least recently stored one, though
// that replica's engine still holds the block.
// Thread: the acceptor (or the simulator's run). Hot path: lookup() once per decision, O(blocks matched ×
// ceil(slots/32) + candidates); store() once per stored block, O(1); no allocation except when arrays grow.
import { HashIntMap } from './hash-int-map.ts';
import { Int32Arena } from './int32-arena.ts';

const NONE = -1;
const INITIAL_MEMBERSHIPS = 4096;
const INITIAL_ROWS = 1024;

export class BlockHolders {
  readonly slots: number;
  /** Per slot: hash → its membership. */
  private readonly bySlot: HashIntMap[];
  // Memberships (hash, slot), in a doubly linked LRU per slot; free ones chained through `older`.
  private hashOf: Float64Array;
  private slotOf: Int32Array;
  /** Towards the older end of the slot's LRU, and towards the newer. */
  private older: Int32Array;
  private newer: Int32Array;
  private freeHead = NONE;
  private used = 0;
  // Per slot: the newest and oldest memberships, how many, and the bound.
  private readonly newest: Int32Array;
  private readonly oldest: Int32Array;
  private readonly counts: Int32Array;
  private readonly capacities: Float64Array;
  /** Memberships dropped because a replica's LRU was over its capacity. */
  evictions = 0;
  /** Holders kept per hash (Infinity: no cap), and with a cap each hash's holders oldest first, `cap` per group. */
  private readonly cap: number;
  private readonly groupOf: HashIntMap | null;
  /** Group g's holders in data[g × cap, …), counts[g] of them; null without a cap. */
  private readonly groups: Int32Arena | null;
  /** Memberships dropped because a hash had `cap` newer holders. */
  capDrops = 0;
  // Per hash, its holders: hash → row; row r's bits in rows.data[r × words, …), bit s set when slot s holds
  // the hash; rows.counts[r] its bits set.
  private readonly words: number;
  private readonly rowOf = new HashIntMap();
  private readonly rows: Int32Arena;
  // lookup()'s scratch: the distinct candidates still running, as a bitmap over slots, and each one's run.
  private readonly want: Int32Array;
  private readonly runOf: Int32Array;

  /**
   * `capacityBlocks`: each slot's LRU bound until setCapacity says otherwise (Infinity: none); `holdersPerHash`:
   * the holders one hash keeps, least recently stored dropped first (Infinity: none).
   */
  constructor(slots: number, capacityBlocks = Infinity, holdersPerHash = Infinity) {
    this.cap = holdersPerHash;
    const capped = Number.isFinite(holdersPerHash);
    this.groupOf = capped ? new HashIntMap() : null;
    this.groups = capped ? new Int32Arena(holdersPerHash, INITIAL_ROWS) : null;
    this.slots = slots;
    this.bySlot = Array.from({ length: slots }, () => new HashIntMap());
    this.hashOf = new Float64Array(INITIAL_MEMBERSHIPS);
    this.slotOf = new Int32Array(INITIAL_MEMBERSHIPS);
    this.older = new Int32Array(INITIAL_MEMBERSHIPS);
    this.newer = new Int32Array(INITIAL_MEMBERSHIPS);
    this.newest = new Int32Array(slots).fill(NONE);
    this.oldest = new Int32Array(slots).fill(NONE);
    this.counts = new Int32Array(slots);
    this.capacities = new Float64Array(slots).fill(capacityBlocks);
    this.words = Math.ceil(slots / 32);
    this.rows = new Int32Arena(this.words, INITIAL_ROWS);
    this.want = new Int32Array(this.words);
    this.runOf = new Int32Array(slots);
  }

  /** Blocks the slot is believed to hold. */
  count(slot: number): number {
    return this.counts[slot]!;
  }

  /** Hashes with at least one holder. */
  hashes(): number {
    return this.rowOf.size;
  }

  holds(slot: number, hash: number): boolean {
    return this.bySlot[slot]!.get(hash) !== NONE;
  }

  /** Replicas believed to hold `hash`. */
  holderCount(hash: number): number {
    const r = this.rowOf.get(hash);
    return r === NONE ? 0 : this.rows.counts[r]!;
  }

  capacity(slot: number): number {
    return this.capacities[slot]!;
  }

  /** The slot's LRU holds at most `blocks` (the replica's num_gpu_blocks); the oldest go at once if over. */
  setCapacity(slot: number, blocks: number): void {
    if (this.capacities[slot] === blocks || !(blocks >= 1)) return;
    this.capacities[slot] = blocks;
    while (this.counts[slot]! > blocks) this.evictOldest(slot);
  }

  /** The slot holds hashes[from..]: each becomes its newest block in that order (present ones refreshed). */
  insert(hashes: Float64Array, from: number, slot: number): number {
    let added = 0;
    for (let b = from; b < hashes.length; b++) if (this.store(slot, hashes[b]!)) added++;
    return added;
  }

  /** The slot holds `hash` now, as its newest block. True when it was not held before. */
  store(slot: number, hash: number): boolean {
    // One probe: the membership a new hash would get is entered at once and taken only if it was new.
    const next = this.freeHead !== NONE ? this.freeHead : this.used;
    const m = this.bySlot[slot]!.putIfAbsent(hash, next);
    if (m !== NONE) {
      this.unlinkLru(m);
      this.linkNewest(m);
      if (this.groupOf !== null) {
        // Stored again: its hash's most recent holder too (an LRU's Add of a present key).
        this.leaveGroup(slot, hash);
        this.joinGroup(slot, hash);
      }
      return false;
    }
    const n = this.allocate();
    this.hashOf[n] = hash;
    this.slotOf[n] = slot;
    this.linkNewest(n);
    this.counts[slot]!++;
    this.addHolder(slot, hash);
    if (this.groupOf !== null) this.joinGroup(slot, hash);
    if (this.counts[slot]! > this.capacities[slot]!) this.evictOldest(slot);
    return true;
  }

  /** Sets `slot`'s bit in `hash`'s row, taking a row for a hash that had no holder. */
  private addHolder(slot: number, hash: number): void {
    const rows = this.rows;
    let r = this.rowOf.putIfAbsent(hash, rows.next());
    if (r === NONE) r = rows.allocate(); // the `next()` just entered
    const w = r * this.words + (slot >>> 5);
    rows.data[w] = rows.data[w]! | (1 << (slot & 31));
    rows.counts[r]!++;
  }

  /** Clears `slot`'s bit in `hash`'s row (held: set), the row freed and the hash deleted when it was the last. */
  private removeHolder(slot: number, hash: number): void {
    const rows = this.rows;
    const r = this.rowOf.get(hash);
    const w = r * this.words + (slot >>> 5);
    rows.data[w] = rows.data[w]! & ~(1 << (slot & 31));
    if (--rows.counts[r]! === 0) {
      // Every bit of the row is clear again, as a new row must be.
      this.rowOf.delete(hash);
      rows.release(r);
    }
  }

  /** `slot` newly holds `hash`: its newest holder; the oldest is forgotten when that makes one too many. */
  private joinGroup(slot: number, hash: number): void {
    const map = this.groupOf!;
    const groups = this.groups!;
    const cap = this.cap;
    let g = map.get(hash);
    if (g === NONE) {
      g = groups.allocate();
      map.set(hash, g);
    }
    if (groups.counts[g] === cap) {
      const victim = groups.data[g * cap]!;
      this.drop(this.bySlot[victim]!.get(hash)); // leaves the group through drop()
      this.capDrops++;
      if (map.get(hash) === NONE) {
        // A cap of one: the group emptied and was freed; take one again.
        g = groups.allocate();
        map.set(hash, g);
      }
    }
    groups.data[g * cap + groups.counts[g]!] = slot;
    groups.counts[g]!++;
  }

  /** `slot` no longer holds `hash`: out of its group, the group freed when empty. */
  private leaveGroup(slot: number, hash: number): void {
    const map = this.groupOf!;
    const g = map.get(hash);
    if (g === NONE) return;
    const groups = this.groups!;
    const data = groups.data;
    const base = g * this.cap;
    const n = groups.counts[g]!;
    let i = 0;
    while (i < n && data[base + i] !== slot) i++;
    if (i === n) return;
    for (; i < n - 1; i++) data[base + i] = data[base + i + 1]!;
    groups.counts[g] = n - 1;
    if (n - 1 === 0) {
      map.delete(hash);
      groups.release(g);
    }
  }

  /** The slot no longer holds `hash` (a BlockRemoved event). True when it was held. */
  remove(slot: number, hash: number): boolean {
    const m = this.bySlot[slot]!.get(hash);
    if (m === NONE) return false;
    this.drop(m);
    return true;
  }

  /** The slot holds nothing (restarted, left, or AllBlocksCleared). */
  clearSlot(slot: number): void {
    while (this.oldest[slot] !== NONE) this.drop(this.oldest[slot]!);
  }

  /**
   * Longest run of consecutive blocks from block 0 that each candidate holds, into out[i] for candidates[i];
   * returns the longest. A run ends at the first block the candidate does not hold.
   */
  lookup(hashes: Float64Array, candidates: readonly number[], out: Int32Array): number {
    const nc = candidates.length;
    const want = this.want;
    const run = this.runOf;
    const words = this.words;
    want.fill(0);
    let left = 0;
    for (let i = 0; i < nc; i++) {
      const s = candidates[i]!;
      const k = s >>> 5;
      const bit = 1 << (s & 31);
      if ((want[k]! & bit) !== 0) continue; // listed twice: one run, copied to both
      want[k] = want[k]! | bit;
      left++;
    }
    // One probe per block; the candidates whose bit is clear in its row stop there.
    const rows = this.rowOf;
    const bits = this.rows.data;
    const n = hashes.length;
    let b = 0;
    for (; b < n && left > 0; b++) {
      const r = rows.get(hashes[b]!);
      if (r === NONE) break; // no holder: every candidate left stops here
      const base = r * words;
      for (let k = 0; k < words; k++) {
        let gone = want[k]! & ~bits[base + k]!;
        if (gone === 0) continue;
        want[k] = want[k]! & ~gone;
        while (gone !== 0) {
          const low = gone & -gone;
          run[(k << 5) + 31 - Math.clz32(low)] = b;
          left--;
          gone ^= low;
        }
      }
    }
    // Candidates still running stop at b: the block no one holds, or the end.
    for (let k = 0; k < words && left > 0; k++) {
      let rest = want[k]!;
      while (rest !== 0) {
        const low = rest & -rest;
        run[(k << 5) + 31 - Math.clz32(low)] = b;
        left--;
        rest ^= low;
      }
    }
    let best = 0;
    for (let i = 0; i < nc; i++) {
      const r = run[candidates[i]!]!;
      out[i] = r;
      if (r > best) best = r;
    }
    return best;
  }

  private evictOldest(slot: number): void {
    this.drop(this.oldest[slot]!);
    this.evictions++;
  }

  /** Removes membership m from its slot's table and LRU and frees it. */
  private drop(m: number): void {
    const slot = this.slotOf[m]!;
    this.bySlot[slot]!.delete(this.hashOf[m]!);
    this.removeHolder(slot, this.hashOf[m]!);
    if (this.groupOf !== null) this.leaveGroup(slot, this.hashOf[m]!);
    this.unlinkLru(m);
    this.counts[slot]!--;
    this.older[m] = this.freeHead;
    this.freeHead = m;
  }

  private linkNewest(m: number): void {
    const slot = this.slotOf[m]!;
    const head = this.newest[slot]!;
    this.older[m] = head;
    this.newer[m] = NONE;
    if (head !== NONE) this.newer[head] = m;
    else this.oldest[slot] = m;
    this.newest[slot] = m;
  }

  private unlinkLru(m: number): void {
    const slot = this.slotOf[m]!;
    const o = this.older[m]!;
    const n = this.newer[m]!;
    if (o !== NONE) this.newer[o] = n;
    else this.oldest[slot] = n;
    if (n !== NONE) this.older[n] = o;
    else this.newest[slot] = o;
  }

  private allocate(): number {
    if (this.freeHead !== NONE) {
      const m = this.freeHead;
      this.freeHead = this.older[m]!;
      return m;
    }
    if (this.used === this.hashOf.length) this.grow();
    return this.used++;
  }

  private grow(): void {
    const n = this.hashOf.length * 2;
    this.hashOf = copyInto(new Float64Array(n), this.hashOf);
    this.slotOf = copyInto(new Int32Array(n), this.slotOf);
    this.older = copyInto(new Int32Array(n), this.older);
    this.newer = copyInto(new Int32Array(n), this.newer);
  }
}

function copyInto<T extends Float64Array | Int32Array>(to: T, from: T): T {
  to.set(from as ArrayLike<number>);
  return to;
}
