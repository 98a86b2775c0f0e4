// One replica's engine block hash → gateway block hash map, and the index writes that follow from its
// BlockStored / BlockRemoved events. ReplicaStream (replica-stream.ts) owns one per replica and decides when
// events are applied; this module decides what an event means for the exact index.
// Thread: the kv-events worker. Per stored block: one xxhash64 (the gateway's hash), one Map set, one index
// write; per removed block: one Map delete and one index write.
//
// Hash mapping. vLLM's block hashes (sha256 / xxhash / cbor variants, seeded per process by NONE_HASH) cannot
// be recomputed here without the server's PYTHONHASHSEED, hash function and serialisation, and they change on
// restart. BlockStored carries what is needed instead: the blocks' token ids, the LoRA adapter and the parent
// block's hash. The gateway's hash of a block is blockHashes(its tokens, adapter, parent's gateway hash)
// (src/tokenize/block-hash.ts), and the parent's gateway hash is known from when the parent was stored, so
// the chain is rebuilt block by block. A block that cannot be keyed is counted (`unmapped`) and left out, and
// so are its descendants (their parent is unknown): an unknown parent (stored before the subscriber joined and
// not replayed), another block size, extra keys beyond the LoRA name (multimodal ids, cache_salt: keys the
// gateway never computes), or an adapter known only by its int id (`lora_id` without `lora_name`, from builds
// that sent no name) that the pool's `lora_ids` does not name: taking those as base-model blocks would
// predict hits the engine never gives.
//
// KV-cache groups. A hybrid model (Gemma 3, gpt-oss: sliding-window and full-attention layers) caches the
// same blocks once per group, and each group stores and evicts them on its own: the sliding-window group drops
// blocks that fall out of its window while the full-attention group still holds them. A long prefix hits only
// as far as the full-attention group holds it, so the index follows that group alone: the first group whose
// BlockStored names a full-attention kind (kv_cache_spec_kind "full_attention", "mla_attention" or
// "sink_full_attention"), whatever its index. Events of other groups (sliding window, mamba, chunked local)
// change nothing, removals included. Builds that send no kind: group 0 (or no group_idx) is taken as the one.
import { blockHashes, ROOT_PARENT_HASH } from '../../tokenize/block-hash.ts';
import { Stat, type EventsIndex } from './events-index.ts';
import type { BlockRemoved, BlockStored } from './wire.ts';

/** vLLM's KVCacheSpecKind values whose group holds every block of a prefix (no window, no state). */
const FULL_ATTENTION_KINDS: ReadonlySet<string> = new Set(['full_attention', 'mla_attention', 'sink_full_attention']);

/**
 * The engine's hashes key the maps as the decoder's bigints themselves: exact (a double keeps 53 of the 64
 * bits, and hashes that differ only in their low bits, as small or negative ints from old builds do, would
 * share a key) and no slower. Measured with 200,000 random u64 hashes, one set + get + delete each, Node 20:
 * 0.41-0.50 µs with bigint keys, 0.56-0.62 µs with Number(hash) keys (that conversion and the heap numbers it
 * boxes cost more than V8's bigint hashing). A bigint key is ~8 bytes more per cached block.
 */

export interface BlockMapOptions {
  slot: number;
  /** The pool's block size: what the gateway hashes with. */
  blockSize: number;
  /** vLLM lora_int_id → adapter name (the pool's `lora_ids`), for BlockStored events that carry no lora_name. */
  loraNames: ReadonlyMap<number, string>;
  /** The index refused a block (full): the stream falls back until its next clear. */
  onOverflow: () => void;
}

export class BlockMap {
  private readonly index: EventsIndex;
  private readonly o: BlockMapOptions;
  /** Engine hash key → the gateway's hash of that block. */
  private readonly gw = new Map<bigint, number>();
  /** Engine hash key → copies beyond the first (vLLM may cache one hash in several physical blocks). */
  private readonly extraCopies = new Map<bigint, number>();
  /** The full-attention group's index, once a BlockStored named it; −1 before. */
  private fullGroup = -1;
  /** Groups a BlockStored named with another kind (sliding window, mamba, …). */
  private readonly otherGroups = new Set<number>();

  constructor(index: EventsIndex, o: BlockMapOptions) {
    this.index = index;
    this.o = o;
  }

  /** Blocks mapped (the engine's cache as the events tell, in the followed group). */
  get size(): number {
    return this.gw.size;
  }

  /** The followed group's index; −1 until a BlockStored named a full-attention kind. */
  get followedGroup(): number {
    return this.fullGroup;
  }

  /** Drops every mapped block from the index (what a group's kind said stays: it is the engine's config). */
  clear(): void {
    const slot = this.o.slot;
    for (const g of this.gw.values()) this.index.remove(slot, g);
    this.gw.clear();
    this.extraCopies.clear();
  }

  /** A new engine process: its groups may differ. */
  reset(): void {
    this.clear();
    this.fullGroup = -1;
    this.otherGroups.clear();
  }

  /** Whether an event of this group (and kind, when the event names one) concerns the followed group. */
  private follows(groupIdx: number | null, kind: string | null): boolean {
    const g = groupIdx ?? 0;
    if (kind !== null) {
      if (!FULL_ATTENTION_KINDS.has(kind)) {
        this.otherGroups.add(g);
        return false;
      }
      if (this.fullGroup < 0) this.fullGroup = g;
      return g === this.fullGroup;
    }
    if (this.fullGroup >= 0) return g === this.fullGroup;
    return g === 0 && !this.otherGroups.has(0);
  }

  /** Applies a BlockStored; returns the blocks it stored in the followed GPU group (mapped or not). */
  stored(e: BlockStored): number {
    const n = e.blockHashes.length;
    if ((e.medium !== null && e.medium !== 'GPU') || !this.follows(e.groupIdx, e.kvCacheSpecKind)) return 0;
    const bs = this.o.blockSize;
    let mappable = n;
    if (e.blockSize !== bs || e.tokenIds.length !== n * bs) mappable = 0;
    let adapter = e.loraName;
    if (adapter === null && e.loraId !== null) {
      // An adapter named only by its int id: its blocks are keyed by a name the gateway must be told.
      adapter = this.o.loraNames.get(e.loraId) ?? null;
      if (adapter === null) mappable = 0;
    }
    let parent = ROOT_PARENT_HASH;
    if (mappable > 0 && e.parentBlockHash !== null) {
      const p = this.gw.get(e.parentBlockHash);
      if (p === undefined) mappable = 0;
      else parent = p;
    }
    if (e.extraKeys !== null) {
      for (let i = 0; i < mappable; i++) {
        const k = e.extraKeys[i];
        if (k !== null && k !== undefined && !(k.length === 0 || (k.length === 1 && k[0] === adapter))) mappable = i;
      }
    }
    const slot = this.o.slot;
    if (mappable < n) this.index.addStat(slot, Stat.Unmapped, n - mappable);
    if (mappable === 0) return n;
    const tokens = mappable === n ? e.tokenIds : e.tokenIds.slice(0, mappable * bs);
    const ours = blockHashes(tokens, bs, adapter, parent);
    for (let i = 0; i < mappable; i++) {
      const key = e.blockHashes[i]!;
      if (this.gw.has(key)) {
        this.extraCopies.set(key, (this.extraCopies.get(key) ?? 0) + 1);
        continue;
      }
      const g = ours[i]!;
      this.gw.set(key, g);
      if (!this.index.add(slot, g)) this.o.onOverflow();
    }
    return n;
  }

  removed(e: BlockRemoved): void {
    if ((e.medium !== null && e.medium !== 'GPU') || !this.follows(e.groupIdx, null)) return;
    for (const key of e.blockHashes) {
      const extra = this.extraCopies.get(key);
      if (extra !== undefined) {
        if (extra > 1) this.extraCopies.set(key, extra - 1);
        else this.extraCopies.delete(key);
        continue;
      }
      const g = this.gw.get(key);
      if (g === undefined) continue;
      this.gw.delete(key);
      this.index.remove(this.o.slot, g);
    }
  }
}
