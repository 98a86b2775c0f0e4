// The fast exact tokenizer for any byte-level BPE tokenizer.json (Llama 3, Qwen 2/3, DeepSeek V3, gpt-oss):
// added tokens split out first (leftmost-longest, as HF's added-vocabulary matcher), NFC where the model
// normalizes, the model's pre-tokenizer regexes run in JS (hf-pre-tokenizer.ts translates them), each piece's ids
// from a bounded per-thread piece cache, and only misses run BPE by the model's merge list (bpe-merges.ts).
// Thread: any; one instance per directory per thread (built by model-tokenizer.ts). Hot path: yes.
// Why not tiktoken for the misses, as the built-in llama3 does: tiktoken merges by token id, which equals the
// model's merge order only for vocabularies trained that way; merging by the merge list is exact for all of them,
// and costs no 40 MB WASM heap per model. Misses are rare once the piece cache is warm.
// Memory: the vocabulary (id → byte-level string array; a string → id Map only when the model sets
// ignore_merges), the merge table (16 bytes per slot), the piece cache (two generations of at most 32,768
// pieces of ≤ 48 chars). README "Memory per tokenizer" has the measured totals.
import { AddedTokenMatcher } from './added-tokens.ts';
import { BpeScratch, MergeTable, bpe } from './bpe-merges.ts';
import type { AddedTokenSpec } from './hf-dir.ts';
import type { FastPathPlan } from './hf-pre-tokenizer.ts';
import { AbortError, type SpecialTokensMap, type TextTokenizer, type TokenScanner } from './types.ts';

const PIECE_CACHE_ENTRIES = 32768;
const MAX_CACHED_PIECE_CHARS = 48;
const STOP_POLL_PIECES = 2048;

/** UTF-16 units of the character at `i`: 2 for a surrogate pair, else 1. */
function charUnits(text: string, i: number): number {
  const c = text.charCodeAt(i);
  if (c < 0xd800 || c > 0xdbff || i + 1 >= text.length) return 1;
  const d = text.charCodeAt(i + 1);
  return d >= 0xdc00 && d <= 0xdfff ? 2 : 1;
}

/** GPT-2's byte → printable character table (the alphabet of byte-level vocabularies). */
export function byteLevelAlphabet(): string[] {
  const out: string[] = new Array<string>(256);
  let shifted = 0;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    out[b] = String.fromCharCode(printable ? b : 256 + shifted++);
  }
  return out;
}

export interface ByteLevelBpeSpec {
  name: string;
  plan: FastPathPlan;
  /** id → byte-level token string (holes for ids only added tokens use). */
  vocab: string[];
  vocabIds: Map<string, number>;
  merges: ReadonlyArray<readonly [number, number, number]>;
  ignoreMerges: boolean;
  addedTokens: readonly AddedTokenSpec[];
  bosId: number | null;
  specialTokens: SpecialTokensMap;
  segmentCut: TokenScanner | null;
}

export class ByteLevelBpeTokenizer implements TextTokenizer {
  readonly name: string;
  readonly bosId: number | null;
  readonly specialTokens: SpecialTokensMap;
  readonly segmentCut: TokenScanner | null;
  private readonly splits: RegExp[];
  /** The same patterns, sticky (splitAt). */
  private readonly stickySplits: RegExp[];
  private readonly nfc: boolean;
  private readonly table: MergeTable;
  private readonly byteIds = new Int32Array(256);
  /** Only for ignore_merges models: a piece that is a whole vocabulary entry is that token. */
  private readonly wholeIds: Map<string, number> | null;
  private readonly alphabet = byteLevelAlphabet();
  private readonly idToToken: string[];
  private readonly added: AddedTokenMatcher;
  private readonly addedIds = new Map<string, number>();
  private young = new Map<string, number | Uint32Array>();
  private old = new Map<string, number | Uint32Array>();
  private scratch = new Uint32Array(4096);
  private bytes = new Uint8Array(256);
  private readonly bpeScratch = new BpeScratch();
  private readonly utf8 = new TextEncoder();
  /** decode() only (tests, tools): built on first use. */
  private charToByte: Map<string, number> | null = null;
  private pieces = 0;
  private shouldStop: (() => boolean) | null = null;

  constructor(spec: ByteLevelBpeSpec) {
    this.name = spec.name;
    this.bosId = spec.bosId;
    this.specialTokens = spec.specialTokens;
    this.segmentCut = spec.segmentCut;
    this.splits = spec.plan.splits.map((r) => new RegExp(r.source, 'gu'));
    this.stickySplits = spec.plan.splits.map((r) => new RegExp(r.source, 'yu'));
    this.nfc = spec.plan.normalizer === 'nfc';
    this.table = new MergeTable(spec.merges);
    for (let b = 0; b < 256; b++) {
      const id = spec.vocabIds.get(this.alphabet[b]!);
      if (id === undefined) throw new Error(`${spec.name}: the vocabulary lacks the byte-level symbol of byte ${b}`);
      this.byteIds[b] = id;
    }
    this.wholeIds = spec.ignoreMerges ? spec.vocabIds : null;
    this.idToToken = spec.vocab;
    this.added = new AddedTokenMatcher(spec.addedTokens);
    for (const t of spec.addedTokens) this.addedIds.set(t.content, t.id);
  }

  /** Bytes of the merge table (the largest typed array this tokenizer holds). */
  mergeTableBytes(): number {
    return this.table.bytes();
  }

  specialId(text: string): number {
    const id = this.addedIds.get(text);
    if (id === undefined) throw new Error(`${this.name} has no added token ${text}`);
    return id;
  }

  decode(ids: ArrayLike<number>): string {
    const bytes: number[] = [];
    const enc = this.utf8;
    const charToByte = (this.charToByte ??= new Map(this.alphabet.map((c, b) => [c, b])));
    for (let i = 0; i < ids.length; i++) {
      const tok = this.idToToken[ids[i]!];
      if (tok === undefined) continue;
      if (this.addedIds.get(tok) === ids[i]) {
        for (const b of enc.encode(tok)) bytes.push(b);
        continue;
      }
      for (const ch of tok) bytes.push(charToByte.get(ch) ?? 0x3f);
    }
    return new TextDecoder('utf-8').decode(Uint8Array.from(bytes));
  }

  encodeOrdinary(text: string): Uint32Array {
    this.begin(text.length, null);
    return this.scratch.slice(0, this.encodeChunk(text, 0));
  }

  encodeWithSpecials(text: string, shouldStop: (() => boolean) | null = null): Uint32Array {
    this.begin(text.length, shouldStop);
    let k = 0;
    let last = 0;
    for (let m = this.added.next(text, 0); m !== null; m = this.added.next(text, last)) {
      if (m.start > last) k = this.encodeChunk(text.slice(last, m.start), k);
      this.scratch[k++] = this.addedIds.get(m.token) as number;
      last = m.end;
    }
    if (last < text.length) k = this.encodeChunk(last === 0 ? text : text.slice(last), k);
    return this.scratch.slice(0, k);
  }

  private begin(chars: number, shouldStop: (() => boolean) | null): void {
    // A UTF-16 unit is at most 3 UTF-8 bytes and a token covers at least one byte; NFC can grow a text, but
    // never past 3× in UTF-16 units, so 9 × chars bounds the ids of even a pathological text.
    const need = (this.nfc ? 9 : 3) * chars + 8;
    if (this.scratch.length < need) this.scratch = new Uint32Array(Math.max(need, this.scratch.length * 2));
    this.shouldStop = shouldStop;
    this.pieces = 0;
  }

  /** A stretch between added tokens: normalized, pre-tokenized, BPE'd. */
  private encodeChunk(chunk: string, k: number): number {
    const text = this.nfc ? chunk.normalize('NFC') : chunk;
    return this.splitAt(text, 0, k);
  }

  /**
   * Level `level`'s pieces of `text`: each match, and each gap between matches, goes on to the next level. A
   * match at the cursor is found with the sticky pattern's test() (no match array per piece: split-bpe.ts says
   * what exec() costs); a match past a gap, or an empty match at the cursor, with the global exec() (it
   * allocates; rare for real pre-tokenizer patterns).
   */
  private splitAt(text: string, level: number, k: number): number {
    if (level === this.splits.length) return this.emit(text, k);
    const re = this.splits[level]!;
    const sticky = this.stickySplits[level]!;
    const lastLevel = level === this.splits.length - 1;
    const n = text.length;
    let last = 0;
    let pos = 0;
    while (pos <= n) {
      let start = pos;
      let end: number;
      sticky.lastIndex = pos;
      if (pos < n && sticky.test(text) && sticky.lastIndex > pos) end = sticky.lastIndex;
      else {
        re.lastIndex = pos;
        const m = re.exec(text);
        if (m === null) break;
        start = m.index;
        end = start + m[0].length;
      }
      if (start > last) k = this.splitAt(text.slice(last, start), level + 1, k);
      const piece = text.slice(start, end);
      k = lastLevel ? this.emit(piece, k) : this.splitAt(piece, level + 1, k);
      last = end;
      // After an empty match the search goes on one character later: a whole surrogate pair, as HF's find_iter
      // and String.prototype.matchAll step (one UTF-16 unit would put a 'u' pattern back on the pair's lead).
      pos = end === start ? end + charUnits(text, end) : end;
    }
    if (last < n) k = this.splitAt(last === 0 ? text : text.slice(last), level + 1, k);
    return k;
  }

  private emit(piece: string, k: number): number {
    let ids = this.young.get(piece);
    if (ids === undefined) ids = this.miss(piece);
    if (typeof ids === 'number') this.scratch[k++] = ids;
    else {
      this.scratch.set(ids, k);
      k += ids.length;
    }
    if (this.shouldStop !== null && ++this.pieces % STOP_POLL_PIECES === 0 && this.shouldStop()) throw new AbortError('encode stopped');
    return k;
  }

  private miss(piece: string): number | Uint32Array {
    let ids = this.old.get(piece);
    if (ids === undefined) {
      ids = this.bpePiece(piece);
      if (piece.length > MAX_CACHED_PIECE_CHARS) return ids;
    }
    if (this.young.size >= PIECE_CACHE_ENTRIES) {
      this.old = this.young;
      this.young = new Map();
    }
    this.young.set(piece, ids);
    return ids;
  }

  private bpePiece(piece: string): number | Uint32Array {
    if (this.bytes.length < 3 * piece.length) this.bytes = new Uint8Array(3 * piece.length + 16);
    const n = this.utf8.encodeInto(piece, this.bytes).written;
    if (this.wholeIds !== null) {
      let word = '';
      for (let i = 0; i < n; i++) word += this.alphabet[this.bytes[i]!];
      const whole = this.wholeIds.get(word);
      if (whole !== undefined) return whole;
    }
    const s = this.bpeScratch;
    s.reserve(n);
    for (let i = 0; i < n; i++) s.ids[i] = this.byteIds[this.bytes[i]!]!;
    const out = new Uint32Array(n);
    const len = bpe(this.table, s, n, out, 0);
    return len === 1 ? out[0]! : out.slice(0, len);
  }
}
