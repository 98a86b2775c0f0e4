// A least-recently-used map bounded by an estimate of its bytes, for the per-thread tokenize caches.
// Thread: any (one instance per cache per thread, never shared). Hot path: get/set are O(1) Map operations.
// Recency is the Map's insertion order, and eviction takes the first key. A hit re-inserts its key (delete +
// set) only when the entry has drifted into the older half of the insertion order: a hot entry (a shared
// system prompt hit by every request) then costs one Map.get per hit instead of three Map operations and
// the tombstones a delete leaves (≈ 1 µs per request in the pipeline bench). The cost is approximate LRU:
// an entry in the newer half that is hit again is not moved, so it can be evicted up to half a cache earlier
// than strict LRU would evict it. The caller supplies each entry's byte estimate (key + value + per-entry overhead) when it sets it;
// an entry larger than an eighth of the budget is not stored, so one huge prompt cannot flush the cache.

/** V8 Map entry, object header and the typed-array wrapper: measured order of magnitude, not exact. */
export const ENTRY_OVERHEAD_BYTES = 128;

export class ByteLru<K, V> {
  private readonly maxBytes: number;
  private readonly map = new Map<K, { value: V; bytes: number; seq: number }>();
  private usedBytes = 0;
  /** Insertion counter: an entry's seq is the value at its last (re)insertion. */
  private seq = 0;

  constructor(maxBytes: number) {
    this.maxBytes = Math.max(0, Math.floor(maxBytes));
  }

  get(key: K): V | undefined {
    const entry = this.map.get(key);
    if (entry === undefined) return undefined;
    if (this.seq - entry.seq > this.map.size >>> 1) {
      this.map.delete(key);
      entry.seq = ++this.seq;
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
    this.map.set(key, { value, bytes, seq: ++this.seq });
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
