// The segment token cache's map: rendered segment text → its token ids, found without hashing the whole text.
// A request's segments are new strings, so a Map keyed by the text hashes every character of every segment on
// every request: for the design's 6 KB system prompt that is ≈ 8 µs, 46 % of a warm seed request's tokenize
// work (src/tokenize/README.md). Here a segment is first looked up by a 32-bit fingerprint of its length, its
// first and last 128 characters and ≈ 256 characters sampled evenly in between (every character of a text up
// to 512), ≈ 0.3 µs. The entry keeps its text and a hit needs `===` on the whole of it (a memcmp, ≈ 20× cheaper
// than the hash), so a hit is exact.
//
// Texts whose fingerprints collide differ only where the sample does not look, which is common: one template
// with a per-user id in the middle gives every user the same fingerprint. The first such text takes the
// fingerprint's slot; the others are kept under their full text as the key, as a text-keyed Map would keep
// them, and cost the full string hash again, only for them. Both kinds of key live in one ByteLru, so one byte budget and one
// recency order cover both, and nothing is dropped for colliding that a text-keyed Map would have kept.
// The fingerprint is seeded per process: V8 hashes number keys without a seed, so a fingerprint that clients
// could compute would let them aim many segments at one Map bucket. Full-text keys use V8's seeded string hash.
// Thread: any; one instance per CachedPromptEncoder. Hot path: get per segment per request.
import { randomFillSync } from 'node:crypto';
import { ByteLru } from './byte-lru.ts';
import { fmix32 } from '../util/fmix32.ts';
import type { TokenizerRef } from './types.ts';

export interface CachedSegment {
  readonly text: string;
  readonly tokenizer: TokenizerRef;
  readonly tokens: Uint32Array;
  /** Never reused: the prefix-hash cache keys on these. */
  readonly id: number;
  readonly bytes: number;
}

/** Texts up to this length are fingerprinted in full. */
const FULL_UP_TO = 512;
const EDGE = 128;
const SAMPLES = 256;
const SEED = randomFillSync(new Uint32Array(1))[0]!;

/**
 * FNV-1a over UTF-16 units from a per-process random basis, mixed with the length, then fmix32: the full text
 * when short, the edges and a stride sample when long.
 */
export function fingerprint(text: string): number {
  const n = text.length;
  let h = Math.imul(SEED ^ n, 0x01000193);
  if (n <= FULL_UP_TO) {
    for (let i = 0; i < n; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  } else {
    for (let i = 0; i < EDGE; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
    for (let i = n - EDGE; i < n; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
    const step = Math.max(1, Math.floor((n - 2 * EDGE) / SAMPLES));
    for (let i = EDGE; i < n - EDGE; i += step) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  }
  // V8's bucket index comes from the low bits: after fmix32 they depend on every input bit.
  return fmix32(h);
}

export class SegmentCache {
  /** number keys: a fingerprint's first text; string keys: a text whose fingerprint slot holds another text. */
  private readonly lru: ByteLru<number | string, CachedSegment>;

  constructor(maxBytes: number) {
    this.lru = new ByteLru(maxBytes);
  }

  /** The cached segment for exactly this text and tokenizer (refreshing its recency), or undefined. */
  get(text: string, tokenizer: TokenizerRef): CachedSegment | undefined {
    const e = this.lru.get(fingerprint(text));
    if (e !== undefined && e.tokenizer === tokenizer && e.text === text) return e;
    // Not in the fingerprint's slot: a text that collided with the slot's (or a miss, about to be tokenized,
    // next to which this full-text hash is cheap).
    const o = this.lru.get(text);
    return o !== undefined && o.tokenizer === tokenizer ? o : undefined;
  }

  /** As get(), without refreshing recency. */
  peek(text: string, tokenizer: TokenizerRef): CachedSegment | undefined {
    const e = this.lru.peek(fingerprint(text));
    if (e !== undefined && e.tokenizer === tokenizer && e.text === text) return e;
    const o = this.lru.peek(text);
    return o !== undefined && o.tokenizer === tokenizer ? o : undefined;
  }

  /** Adds a segment after a miss; returns whether the cache kept it (ByteLru refuses one over 1/8 of the budget). */
  add(segment: CachedSegment): boolean {
    const fp = fingerprint(segment.text);
    const slot = this.lru.peek(fp);
    // The slot is free, or holds this very entry's text and tokenizer (a re-add): take it. Otherwise, another
    // text (or this text under another tokenizer) owns the slot: key this one by its full text.
    if (slot === undefined || (slot.text === segment.text && slot.tokenizer === segment.tokenizer)) return this.lru.set(fp, segment, segment.bytes);
    return this.lru.set(segment.text, segment, segment.bytes);
  }

  get bytes(): number {
    return this.lru.bytes;
  }

  get capacityBytes(): number {
    return this.lru.capacityBytes;
  }
}
