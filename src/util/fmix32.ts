// MurmurHash3's 32-bit finaliser: every input bit flips each output bit with probability ½. Used where a
// cheap 32-bit hash must not leave structure in the low bits (a V8 Map takes its bucket from them).
// Thread: any. Pure.
export function fmix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

const TWO_POW_32 = 4294967296;

/** Bucket of a 53-bit hash in a power-of-two table of `mask + 1` buckets: both 32-bit halves mixed, then fmix32. */
export function bucketOf53(hash: number, mask: number): number {
  return fmix32((hash >>> 0) ^ Math.imul(Math.floor(hash / TWO_POW_32) | 0, 0x9e3779b1)) & mask;
}
