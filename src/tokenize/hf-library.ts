// Models the fast byte-level path does not take (SentencePiece-style BPE with byte fallback such as Gemma 3,
// Unigram, Metaspace or WordPiece pre-tokenizers, …) are tokenized by @huggingface/tokenizers, Hugging Face's
// pure-JS port of its tokenizers (the one transformers.js runs). The only importer of that package.
// Thread: any; one instance per directory per thread (model-tokenizer.ts builds it). Hot path: yes for such
// pools, behind the segment cache (only segments not seen before reach it).
// Cancellation: the library cannot be interrupted inside one encode, so a long segment is encoded in stretches
// cut before its added tokens (exact: HF splits added tokens out before anything else) and `shouldStop` is
// polled between stretches.
import { Tokenizer } from '@huggingface/tokenizers';
import type { HfTokenizerFiles } from './hf-dir.ts';
import { AbortError, type SpecialTokensMap, type TextTokenizer, type TokenScanner } from './types.ts';

/** A stretch this long or longer is cut before an added token, when it has one, so a stop is seen in time. */
const STRETCH_CHARS = 16384;

export class LibraryTokenizer implements TextTokenizer {
  readonly name: string;
  readonly bosId: number | null;
  readonly specialTokens: SpecialTokensMap;
  readonly segmentCut: TokenScanner | null;
  private readonly tok: Tokenizer;
  private readonly addedIds: Map<string, number>;

  constructor(name: string, files: HfTokenizerFiles, bosId: number | null, segmentCut: TokenScanner | null) {
    this.name = name;
    this.bosId = bosId;
    this.specialTokens = files.specialTokens;
    this.segmentCut = segmentCut;
    this.tok = new Tokenizer(files.tokenizer, files.config);
    this.addedIds = new Map(files.addedTokens.map((t) => [t.content, t.id]));
  }

  /** The library has no "added tokens as plain text" switch; special text is parsed here too. */
  encodeOrdinary(text: string): Uint32Array {
    return this.encodeWithSpecials(text);
  }

  encodeWithSpecials(text: string, shouldStop: (() => boolean) | null = null): Uint32Array {
    if (shouldStop === null || text.length < STRETCH_CHARS || this.segmentCut === null) return Uint32Array.from(this.ids(text));
    const parts: number[][] = [];
    let start = 0;
    // Cut before the first added token at least STRETCH_CHARS past the last cut (exact: see the header).
    for (let m = this.segmentCut.next(text, STRETCH_CHARS); m !== null; m = this.segmentCut.next(text, Math.max(m.end, start + STRETCH_CHARS))) {
      if (m.start <= start) continue;
      if (shouldStop()) throw new AbortError('encode stopped');
      parts.push(this.ids(text.slice(start, m.start)));
      start = m.start;
    }
    if (shouldStop()) throw new AbortError('encode stopped');
    parts.push(this.ids(text.slice(start)));
    return Uint32Array.from(parts.flat());
  }

  private ids(text: string): number[] {
    return this.tok.encode(text, { add_special_tokens: false }).ids;
  }

  decode(ids: ArrayLike<number>): string {
    return this.tok.decode(Array.from(ids), { skip_special_tokens: false });
  }

  specialId(text: string): number {
    const id = this.addedIds.get(text);
    if (id === undefined) throw new Error(`${this.name} has no added token ${text}`);
    return id;
  }
}
