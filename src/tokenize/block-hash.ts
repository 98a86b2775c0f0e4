// Chained block hashes of a token sequence, the gateway's and the mock replica's common key for a KV block.
// Thread: any; each thread calls `await initBlockHasher()` once at setup (hash-wasm instantiates WASM
// asynchronously), then blockHashes() is synchronous. Hot path: one xxhash64 call per full block.
//
// Strategy (vLLM's hash_block_tokens, docs/vllm-facts.md "Prefix-cache block hashing"): block i's hash covers
//   parent (block i-1's hash, or ROOT_PARENT for block 0) || the block's token ids || extra key
// so equal hashes mean equal prefixes up to that block; only FULL blocks are hashed (a trailing partial
// block never is). The extra key is the LoRA adapter name (vLLM's lora_keys), hashed once per call to 8
// bytes; null (base model) is 8 zero bytes. Input per block: 8 + 4*blockSize + 8 bytes, little-endian u32
// token ids. The value kept is the low 53 bits of the 64-bit digest, so it is exact as a JS number (a Map
// key, a Float64Array element) and the next block chains on that same value, which lets a caller extend
// a chain later (e.g. the mock hashing generated tokens) from the last value alone.
//
// Why xxhash64: measured with hash-wasm on this machine (src/tokenize/README.md, native-bench tokenize):
// ~0.6 µs per 16-token block against ~0.76 (xxh3-64), ~2.3 (xxh128), ~2.6 (sha256); the per-call JS/WASM
// overhead dominates at 80-byte inputs. Collisions: with n distinct live blocks across the fleet, the
// chance that any two share a 53-bit value is about n²/2^54: 5e-5 at n = 1e6, 5e-3 at n = 1e7. A collision
// only mis-states a prefix-cache hit (a routing hint at the gateway, a simulated hit in the mock); it never
// mixes data, since real vLLM keys its cache with its own hash. xxhash64 is not collision-resistant
// against an adversary, for the same reason that is acceptable: the worst a crafted prompt can do is
// steer its own routing.
import { createXXHash64, type IHasher } from 'hash-wasm';

let hasher: IHasher | null = null;

/** Instantiates the WASM hasher for this thread. Idempotent; await it before the first blockHashes(). */
export async function initBlockHasher(): Promise<void> {
  hasher ??= await createXXHash64(0, 0);
}

function requireHasher(): IHasher {
  if (hasher === null) throw new Error('initBlockHasher() must be awaited before blockHashes()');
  return hasher;
}

const TWO_POW_32 = 2 ** 32;
/** Parent of block 0: an arbitrary fixed 53-bit constant (vLLM's NONE_HASH, but fixed so that all our processes agree). */
export const ROOT_PARENT_HASH = 0x0c0ffee5eed * 97;

let scratch = new Uint8Array(80);
let scratchView = new DataView(scratch.buffer);
const keyDigest = new Uint32Array(2);
const utf8 = new TextEncoder();

/** Low 53 bits of a big-endian 8-byte digest. */
function digestTo53(d: Uint8Array): number {
  const hi = ((d[0] as number) << 24 | (d[1] as number) << 16 | (d[2] as number) << 8 | (d[3] as number)) >>> 0;
  const lo = ((d[4] as number) << 24 | (d[5] as number) << 16 | (d[6] as number) << 8 | (d[7] as number)) >>> 0;
  return (hi & 0x1fffff) * TWO_POW_32 + lo;
}

function computeKeyDigest(h: IHasher, extraKey: string | null): void {
  if (extraKey === null) {
    keyDigest[0] = 0;
    keyDigest[1] = 0;
    return;
  }
  h.init();
  h.update(utf8.encode(`lora:${extraKey}`));
  const d = h.digest('binary');
  keyDigest[0] = (d[4] as number) << 24 | (d[5] as number) << 16 | (d[6] as number) << 8 | (d[7] as number);
  keyDigest[1] = (d[0] as number) << 24 | (d[1] as number) << 16 | (d[2] as number) << 8 | (d[3] as number);
}

/**
 * One hash per full block of `tokens`: result[i] covers tokens[0 .. (i+1)*blockSize). Each value is an
 * integer in [0, 2^53). `parentHash` continues a chain (tokens must then start at a block boundary).
 */
export function blockHashes(
  tokens: ArrayLike<number>,
  blockSize: number,
  extraKey: string | null,
  parentHash: number | null = null,
): Float64Array {
  return blockHashesOfParts([tokens], 0, blockSize, extraKey, parentHash);
}

/**
 * blockHashes over the concatenation of `parts` from token `start` (a block boundary; `parentHash` is then the
 * hash of the block before it), without building the concatenation: the chat path keeps each segment's
 * cached ids and hashes across them, and skips the blocks a cached prefix already covers.
 */
export function blockHashesOfParts(
  parts: readonly ArrayLike<number>[],
  start: number,
  blockSize: number,
  extraKey: string | null,
  parentHash: number | null = null,
): Float64Array {
  if (!Number.isInteger(blockSize) || blockSize <= 0) throw new RangeError(`blockSize must be a positive integer, got ${blockSize}`);
  const h = requireHasher();
  let total = 0;
  for (let i = 0; i < parts.length; i++) total += parts[i]!.length;
  const blocks = Math.max(0, Math.floor((total - start) / blockSize));
  const out = new Float64Array(blocks);
  if (blocks === 0) return out;
  const inputBytes = 8 + 4 * blockSize + 8;
  if (scratch.length !== inputBytes) {
    scratch = new Uint8Array(inputBytes);
    scratchView = new DataView(scratch.buffer);
  }
  computeKeyDigest(h, extraKey);
  const keyOffset = 8 + 4 * blockSize;
  scratchView.setUint32(keyOffset, keyDigest[0] as number, true);
  scratchView.setUint32(keyOffset + 4, keyDigest[1] as number, true);
  // Cursor: part p, index t inside it, positioned at token `start`.
  let p = 0;
  let t = start;
  while (p < parts.length && t >= parts[p]!.length) t -= parts[p++]!.length;
  let part = parts[p]!;
  let parent = parentHash ?? ROOT_PARENT_HASH;
  for (let b = 0; b < blocks; b++) {
    scratchView.setUint32(0, parent % TWO_POW_32, true);
    scratchView.setUint32(4, Math.floor(parent / TWO_POW_32), true);
    for (let i = 0; i < blockSize; i++) {
      while (t >= part.length) {
        part = parts[++p]!;
        t = 0;
      }
      scratchView.setUint32(8 + 4 * i, part[t++] as number, true);
    }
    h.init();
    h.update(scratch);
    parent = digestTo53(h.digest('binary'));
    out[b] = parent;
  }
  return out;
}
