// The fast exact tokenizer: the pre-tokenizer split runs in JS (V8's irregexp), each piece's BPE ids come
// from a bounded per-thread piece cache, and only cache misses cross into tiktoken's WASM BPE.
// Thread: any; one instance per thread per tokenizer name (built by tokenizer.ts). Hot path: yes.
// The split walks the text with a sticky pattern's test() and slices each piece: pieces are contiguous (every
// code point starts one), and test() builds no match array. Cost of exec() instead: a ~90-byte match array per
// piece; on a burst of long prompts those land on young-generation pages the kernel must fault in and zero
// (~4 MB per 60 prompts of 1,500 tokens; 1.5-3x the split's CPU on the overload demo's prompts).
// Why: tiktoken spends most of its ~0.9 µs/token in the JS<->WASM string transfer and its Rust regex; a
// natural-language prompt reuses a few thousand distinct pieces, so a warm piece cache makes encoding
// ~10x cheaper (src/tokenize/README.md, `npm run bench -- tokenize`). Exact because (1) the JS pattern
// is the model's pattern with \s spelled out as Unicode White_Space (JS's \s differs on U+0085, U+FEFF) and
// the case-insensitive contractions spelled out with Unicode simple case folding (ſ folds to s), and
// (2) BPE of a piece in isolation equals BPE of that piece in context: tiktoken re-splits the piece into
// itself (no alternative can match differently inside a match, and the only lookahead, \s+(?!\S), matches
// the whole whitespace piece at end of input). test/unit/tokenize/split-bpe.test.ts checks it against
// tiktoken direct on the corpus and on seeded random text.
// Memory: two generations of at most PIECE_CACHE_ENTRIES pieces of at most MAX_CACHED_PIECE_CHARS chars,
// about 10 MB per thread at worst.
import { AbortError, type SpecialTokensMap, type TextTokenizer, type TokenScanner } from './types.ts';

const WS = '\\t\\n\\v\\f\\r \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';

/**
 * The Llama 3 / cl100k_base split pattern for JS: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|
 * \p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 */
export const LLAMA3_JS_SPLIT = new RegExp(
  `'(?:[sSſ]|[tT]|[rR][eE]|[vV][eE]|[mM]|[lL][lL]|[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^${WS}\\p{L}\\p{N}]+[\\r\\n]*|[${WS}]*[\\r\\n]+|[${WS}]+(?![^${WS}])|[${WS}]+`,
  'gu',
);

const PIECE_CACHE_ENTRIES = 32768;
const MAX_CACHED_PIECE_CHARS = 48;
/** How often (in pieces) a long encode polls its stop callback: cheap enough to be invisible. */
const STOP_POLL_PIECES = 2048;

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

export class SplitBpeTokenizer implements TextTokenizer {
  readonly name: string;
  readonly bosId: number | null;
  readonly specialTokens: SpecialTokensMap;
  readonly segmentCut: TokenScanner | null;
  private readonly bpe: TextTokenizer;
  /** The split pattern, sticky: test() at each piece's start, with no match array to allocate. */
  private readonly split: RegExp;
  /** The same pattern, global: finds the next piece when none starts at the cursor. */
  private readonly search: RegExp;
  private readonly specialSplit: RegExp;
  private readonly specialIds: Map<string, number>;
  /** Every special starts with this (e.g. "<|"), so text without it needs no special-token scan. */
  private readonly specialPrefix: string;
  // Two-generation cache: hits in `old` are promoted; when `young` fills, it becomes `old`. O(1), ~LRU.
  private young = new Map<string, number | Uint32Array>();
  private old = new Map<string, number | Uint32Array>();
  private scratch = new Uint32Array(4096);

  /** `bpe` is the exact tiktoken encoder for the same vocabulary; `specials` maps special text to ids. */
  constructor(bpe: TextTokenizer, split: RegExp, specials: Record<string, number>) {
    this.name = bpe.name;
    this.bosId = bpe.bosId;
    this.specialTokens = bpe.specialTokens;
    this.segmentCut = bpe.segmentCut;
    this.bpe = bpe;
    this.split = new RegExp(split.source, 'yu');
    this.search = new RegExp(split.source, 'gu');
    this.specialIds = new Map(Object.entries(specials));
    const names = [...this.specialIds.keys()].sort((a, b) => b.length - a.length);
    this.specialSplit = new RegExp(names.map(escapeRegExp).join('|'), 'g');
    const first = names[0] ?? '';
    this.specialPrefix = names.every((n) => n.startsWith(first.slice(0, 2))) ? first.slice(0, 2) : '';
  }

  specialId(text: string): number {
    return this.bpe.specialId(text);
  }

  decode(ids: ArrayLike<number>): string {
    return this.bpe.decode(ids);
  }

  encodeOrdinary(text: string): Uint32Array {
    this.reserve(text.length);
    return this.scratch.slice(0, this.encodeRun(text, 0, null));
  }

  encodeWithSpecials(text: string, shouldStop: (() => boolean) | null = null): Uint32Array {
    this.reserve(text.length);
    if (this.specialPrefix !== '' && !text.includes(this.specialPrefix)) {
      return this.scratch.slice(0, this.encodeRun(text, 0, shouldStop));
    }
    let k = 0;
    let last = 0;
    const re = this.specialSplit;
    re.lastIndex = 0;
    for (let m = re.exec(text); m !== null; m = re.exec(text)) {
      if (m.index > last) k = this.encodeRun(text.slice(last, m.index), k, shouldStop);
      this.scratch[k++] = this.specialIds.get(m[0]) as number;
      last = m.index + m[0].length;
    }
    if (last < text.length) k = this.encodeRun(last === 0 ? text : text.slice(last), k, shouldStop);
    return this.scratch.slice(0, k);
  }

  /** A UTF-16 code unit is at most 3 UTF-8 bytes, and a token covers at least one byte. */
  private reserve(chars: number): void {
    const need = 3 * chars + 8;
    if (this.scratch.length < need) this.scratch = new Uint32Array(Math.max(need, this.scratch.length * 2));
  }

  private encodeRun(text: string, start: number, shouldStop: (() => boolean) | null): number {
    const out = this.scratch;
    const re = this.split;
    const n = text.length;
    let k = start;
    let pieces = 0;
    let pos = 0;
    while (pos < n) {
      re.lastIndex = pos;
      let from = pos;
      let end: number;
      if (re.test(text)) end = re.lastIndex;
      else {
        // No piece starts here: skip to the next piece, as tiktoken's find_iter does. Never for LLAMA3_JS_SPLIT
        // (every code point, lone surrogates too, starts a piece); a narrower pattern leaves gaps.
        const g = this.search;
        g.lastIndex = pos;
        const m = g.exec(text);
        if (m === null) break;
        from = m.index;
        end = from + m[0].length;
      }
      pos = end;
      const piece = text.slice(from, end);
      let ids = this.young.get(piece);
      if (ids === undefined) ids = this.miss(piece);
      if (typeof ids === 'number') out[k++] = ids;
      else {
        out.set(ids, k);
        k += ids.length;
      }
      if (shouldStop !== null && ++pieces % STOP_POLL_PIECES === 0 && shouldStop()) throw new AbortError('encode stopped');
    }
    return k;
  }

  private miss(piece: string): number | Uint32Array {
    let ids = this.old.get(piece);
    if (ids === undefined) {
      const encoded = this.bpe.encodeOrdinary(piece);
      ids = encoded.length === 1 ? (encoded[0] as number) : encoded;
      if (piece.length > MAX_CACHED_PIECE_CHARS) return ids;
    }
    if (this.young.size >= PIECE_CACHE_ENTRIES) {
      this.old = this.young;
      this.young = new Map();
    }
    this.young.set(piece, ids);
    return ids;
  }
}
