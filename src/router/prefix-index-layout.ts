// The prefix index's shared memory layout (src/router/prefix-index.ts): the header's words and a bucket's, in
// 32-bit words. Constants only: the index reads and writes them; a thread attaching to another's buffer checks
// MAGIC and the header's sizes against these.

/**
 * Ways per bucket and holders per way. A hot prefix spread by the load bound sits on many replicas: with four
 * holders, a fifth replica's copy displaced a live one on a fifth of the seed mix's inserts at twice its
 * capacity (40 replicas), and the index under-credited the pool by 5-17 points of hit rate. Sixteen cost 3.4×
 * the memory, 1.3× a 2,000-block lookup and 1.8× its insert (src/router/README.md, "Speed").
 */
export const WAYS = 8;
export const HOLDERS = 16;

// Header, Int32 words.
export const H_MAGIC = 0;
export const H_SLOTS = 1;
export const H_BUCKETS = 2;
export const H_ENTRIES = 3;
export const H_EVICTIONS = 4;
export const H_TICK = 5;
export const HEADER_I32 = 8;
export const MAGIC = 0x50524658; // 'PRFX'

// Bucket layout, in 32-bit words from the bucket's base (buckets are 64-byte aligned): a probe reads one
// cache line for the version and the 8 tags, then the matching way's two lines (holders and stamps), so a
// lookup costs three cache lines per block. Line 0: version, low hash words, high tags (u16: 15 bits of the
// hash's high part with a valid bit). Then one 128-byte record per way: 16 u16 holders (slot+1), 16 u32
// stamps, recency, padding.
export const B_VERSION = 0;
export const B_LO = 1;
export const B_TAG16 = B_LO + WAYS; // WAYS u16 = 4 words
export const B_WAYS = 16;
export const W_HOLDERS = 0; // HOLDERS u16 = 8 words
export const W_STAMPS = 8; // HOLDERS u32 = 16 words
export const W_RECENCY = 24;
export const WAY_I32 = 32;
export const BUCKET_I32 = B_WAYS + WAYS * WAY_I32; // 272 words = 1,088 bytes
export const TAG_VALID = 0x8000;

/** First bucket word: after the header and the per-slot words, rounded up to a 64-byte boundary. */
export function bucketBaseOf(slots: number): number {
  return Math.ceil((HEADER_I32 + 2 * slots) / 16) * 16;
}
