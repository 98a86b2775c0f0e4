// A least-recently-used map bounded by an estimate of its bytes, for the per-thread tokenize caches.
// Thread: any (one instance per cache per thread, never shared). Hot path: get/set are O(1) Map operations.
// Recency is the Map's insertion order, and eviction takes the first key. A hit re-inserts its key (delete +
// set) only when the entry may have drifted into the older half of the cache by bytes: the bytes (re)inserted
// since the entry's own (re)insertion bound the bytes behind it, and when that bound is at most half of the
// bytes held, at least half the cache lies in front of it and one insertion (at most an eighth of the budget)
// cannot reach it. So an entry hit before every insertion is never evicted, as under strict LRU, while a hot
// entry (a shared system prompt hit by every request) costs one Map.get per hit instead of three Map
// operations and the tombstones a delete leaves (≈ 1 µs per request in the pipeline bench). The cost is
// approximate LRU: an entry in the newer half that is hit again is not moved, so among entries hit equally
// rarely, eviction order can differ from strict LRU. The bound is in bytes, not entries: counted in entries,
// small entries in front and large ones behind could evict a hot entry (test/unit/tokenize/byte-lru-hot-entry.test.ts).
// The caller supplies each entry's byte estimate (key + value + per-entry overhead) when it sets it;
// an entry larger than an eighth of the budget is not stored, so one huge prompt cannot flush the cache.

/** V8 Map entry, object header and the typed-array wrapper: measured order of magnitude, not exact. */
export const ENTRY_OVERHEAD_BYTES = 128;

export class ByteLru<K, V> {
  private readonly maxBytes: number;
  private readonly map = new Map<K, { value: V; bytes: number; at: number }>();
  private usedBytes = 0;
  /** Bytes (re)inserted so far; an entry's `at` is this total just after its last (re)insertion. */
  private insertedBytes = 0;

  constructor(maxBytes: number) {
    this.maxBytes = Math.max(0, Math.floor(maxBytes));
  }

  get(key: K): V | undefined {
    const entry = this.map.get(key);
    if (entry === undefined) return undefined;
    if (this.insertedBytes - entry.at > this.usedBytes / 2) {
      this.map.delete(key);
      this.insertedBytes += entry.bytes;
      entry.at = this.insertedBytes;
      this.map.set(key, entry);
    }
    return entry.value;
  }

  /** The cached value, without refreshing its recency. */
  peek(key: K): V | undefined {
    return this.map.get(key)?.value;
  }

  /** Stores `value` unless it is too big for this cache; returns whether it was stored. */
  set(key: K, value: V, bytes: number): boolean {
    if (bytes > this.maxBytes / 8) return false;
    const old = this.map.get(key);
    if (old !== undefined) {
      this.usedBytes -= old.bytes;
      this.map.delete(key);
    }
    this.insertedBytes += bytes;
    this.map.set(key, { value, bytes, at: this.insertedBytes });
    this.usedBytes += bytes;
    while (this.usedBytes > this.maxBytes) {
      const first = this.map.keys().next();
      if (first.done === true) break;
      const evicted = this.map.get(first.value) as { bytes: number };
      this.usedBytes -= evicted.bytes;
      this.map.delete(first.value);
    }
    return true;
  }

  get bytes(): number {
    return this.usedBytes;
  }

  get size(): number {
    return this.map.size;
  }

  get capacityBytes(): number {
    return this.maxBytes;
  }
}
