// The segment token cache's map: rendered segment text → its token ids, found without hashing the whole text.
// A request's segments are new strings, so a Map keyed by the text hashes every character of every segment on
// every request: for the design's 6 KB system prompt that is ≈ 8 µs, 46 % of a warm seed request's tokenize
// work (src/tokenize/README.md). Here the key is a 32-bit fingerprint of the length, the first and last 128
// characters and ≈ 256 characters sampled evenly in between (every character of a text up to 512), ≈ 0.3 µs;
// the entry keeps its text, and a hit needs `===` on the whole text (a memcmp, ≈ 20× cheaper than the hash),
// so a hit is exact as before. Texts whose fingerprints collide (they differ only where the sample does not
// look) share a bucket of at most BUCKET_MAX entries, compared in turn; past that the oldest in the bucket
// leaves, so a flood of near-identical prompts costs re-tokenization, never a wrong answer or an unbounded scan.
// Thread: any; one instance per CachedPromptEncoder. Hot path: get per segment per request.
import { ByteLru } from './byte-lru.ts';
import type { TokenizerName } from './tokenizer.ts';

export interface CachedSegment {
  readonly text: string;
  readonly tokenizer: TokenizerName;
  readonly tokens: Uint32Array;
  /** Never reused: the prefix-hash cache keys on these. */
  readonly id: number;
  readonly bytes: number;
}

/** Entries per fingerprint bucket before the oldest leaves. */
export const BUCKET_MAX = 8;
/** Texts up to this length are fingerprinted in full. */
const FULL_UP_TO = 512;
const EDGE = 128;
const SAMPLES = 256;

/** FNV-1a over UTF-16 units, seeded with the length: the full text when short, the edges and a stride sample when long. */
export function fingerprint(text: string): number {
  const n = text.length;
  let h = Math.imul(0x811c9dc5 ^ n, 0x01000193);
  if (n <= FULL_UP_TO) {
    for (let i = 0; i < n; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
    return h >>> 0;
  }
  for (let i = 0; i < EDGE; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  for (let i = n - EDGE; i < n; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  const step = Math.max(1, Math.floor((n - 2 * EDGE) / SAMPLES));
  for (let i = EDGE; i < n - EDGE; i += step) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

export class SegmentCache {
  private readonly lru: ByteLru<number, CachedSegment[]>;

  constructor(maxBytes: number) {
    this.lru = new ByteLru(maxBytes);
  }

  /** The cached segment for exactly this text and tokenizer (refreshing its recency), or undefined. */
  get(text: string, tokenizer: TokenizerName): CachedSegment | undefined {
    return find(this.lru.get(fingerprint(text)), text, tokenizer);
  }

  /** As get(), without refreshing recency. */
  peek(text: string, tokenizer: TokenizerName): CachedSegment | undefined {
    return find(this.lru.peek(fingerprint(text)), text, tokenizer);
  }

  /** Adds a segment (callers add only after a miss); returns whether the cache kept it. */
  add(segment: CachedSegment): boolean {
    const key = fingerprint(segment.text);
    const old = this.lru.peek(key);
    // A new array: the old bucket's byte count stays what ByteLru was told until set() replaces it.
    const bucket = old === undefined ? [segment] : [...old.filter((e) => !(e.text === segment.text && e.tokenizer === segment.tokenizer)), segment];
    while (bucket.length > BUCKET_MAX) bucket.shift();
    let bytes = 0;
    for (let i = 0; i < bucket.length; i++) bytes += bucket[i]!.bytes;
    return this.lru.set(key, bucket, bytes);
  }

  get bytes(): number {
    return this.lru.bytes;
  }

  get capacityBytes(): number {
    return this.lru.capacityBytes;
  }
}

function find(bucket: readonly CachedSegment[] | undefined, text: string, tokenizer: TokenizerName): CachedSegment | undefined {
  if (bucket === undefined) return undefined;
  for (let i = 0; i < bucket.length; i++) {
    const e = bucket[i]!;
    if (e.tokenizer === tokenizer && e.text === text) return e;
  }
  return undefined;
}
