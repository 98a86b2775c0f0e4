// Text tokenizers by name: Llama 3 (BPE over the Llama 3 ranks in data/llama3.tiktoken.gz, exact against the
// reference llama3-tokenizer-js), and OpenAI's cl100k_base / o200k_base.
// Thread: any (main acceptor for small prompts, Piscina workers for the rest); each thread builds its own
// instances lazily, once per name (~0.6 s and ~40 MB of WASM heap for Llama 3), then caches them.
// Hot path: encode*() is the per-request cost (see src/tokenize/README.md for the measured tokens/s).
// Which implementation, by measurement (README): llama3 and cl100k_base use SplitBpeTokenizer (JS split +
// piece cache, tiktoken for misses), ~10x faster warm than tiktoken alone, which is ~3x faster than the
// reference JS package; o200k_base (a different split pattern) uses tiktoken directly.
// This folder is the only importer of @dqbd/tiktoken.
import { readFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';
import { Tiktoken, get_encoding } from '@dqbd/tiktoken';
import { AddedTokenMatcher } from './added-tokens.ts';
import { loadDirTokenizer } from './model-tokenizer.ts';
import { LLAMA3_JS_SPLIT, SplitBpeTokenizer } from './split-bpe.ts';
import type { SpecialTokensMap, TextTokenizer, TokenizerName, TokenizerRef } from './types.ts';

/** Llama 3's pre-tokenizer split, verbatim from the model's tokenizer.json (tiktoken's regex engine takes (?i:)). */
export const LLAMA3_SPLIT_PATTERN =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

export const LLAMA3_ORDINARY_VOCAB_SIZE = 128000;

/** The 256 Llama 3 special tokens, ids 128000-128255, named as in the Llama 3.1 tokenizer_config.json. */
export function llama3SpecialTokens(): Record<string, number> {
  const named: Record<number, string> = {
    0: '<|begin_of_text|>',
    1: '<|end_of_text|>',
    4: '<|finetune_right_pad_id|>',
    6: '<|start_header_id|>',
    7: '<|end_header_id|>',
    8: '<|eom_id|>',
    9: '<|eot_id|>',
    10: '<|python_tag|>',
  };
  const out: Record<string, number> = {};
  let reserved = 0;
  for (let i = 0; i < 256; i++) {
    out[named[i] ?? `<|reserved_special_token_${reserved++}|>`] = LLAMA3_ORDINARY_VOCAB_SIZE + i;
  }
  return out;
}

/**
 * ChatML markers for the OpenAI encodings. cl100k_base uses the ids tiktoken's "cl100k_im" used for
 * gpt-3.5-turbo; o200k_base has no published ChatML ids, so we take the same offset above its last special
 * (<|endofprompt|> = 200018): an assumption, harmless because gateway and mock share this table.
 */
const CHATML_SPECIALS: Record<'cl100k_base' | 'o200k_base', Record<string, number>> = {
  cl100k_base: { '<|im_start|>': 100264, '<|im_end|>': 100265, '<|im_sep|>': 100266 },
  o200k_base: { '<|im_start|>': 200264, '<|im_end|>': 200265, '<|im_sep|>': 200266 },
};

/** The bos/eos names a Jinja template sees with a built-in tokenizer (Llama 3.1 Instruct's; OpenAI's end of text). */
const BUILTIN_SPECIAL_TOKENS: Record<TokenizerName, SpecialTokensMap> = {
  llama3: { bos_token: '<|begin_of_text|>', eos_token: '<|eot_id|>' },
  cl100k_base: { eos_token: '<|endoftext|>' },
  o200k_base: { eos_token: '<|endoftext|>' },
};

class TiktokenTextTokenizer implements TextTokenizer {
  readonly name: TokenizerName;
  readonly bosId: number | null;
  readonly specialTokens: SpecialTokensMap;
  /** Every special of a built-in starts a text tiktoken splits out before anything else: all are cuts. */
  readonly segmentCut: AddedTokenMatcher;
  private readonly encoder: Tiktoken;
  private readonly specials: Map<string, number>;
  private readonly utf8 = new TextDecoder('utf-8');

  readonly specialTable: Readonly<Record<string, number>>;

  constructor(name: TokenizerName, encoder: Tiktoken, specials: Record<string, number>, bosId: number | null) {
    this.name = name;
    this.encoder = encoder;
    this.specials = new Map(Object.entries(specials));
    this.specialTable = specials;
    this.bosId = bosId;
    this.specialTokens = BUILTIN_SPECIAL_TOKENS[name];
    this.segmentCut = new AddedTokenMatcher(Object.keys(specials).map((content) => ({ content })));
  }

  encodeOrdinary(text: string): Uint32Array {
    return this.encoder.encode_ordinary(text);
  }

  encodeWithSpecials(text: string): Uint32Array {
    // 'all' allows every special; tiktoken splits at the leftmost special, as HF's added-token matcher does.
    return this.encoder.encode(text, 'all', []);
  }

  decode(ids: ArrayLike<number>): string {
    const u32 = ids instanceof Uint32Array ? ids : Uint32Array.from(ids);
    return this.utf8.decode(this.encoder.decode(u32));
  }

  specialId(text: string): number {
    const id = this.specials.get(text);
    if (id === undefined) throw new Error(`${this.name} has no special token ${text}`);
    return id;
  }
}

function buildLlama3(): TiktokenTextTokenizer {
  const ranksGz = readFileSync(new URL('./data/llama3.tiktoken.gz', import.meta.url));
  const specials = llama3SpecialTokens();
  const encoder = new Tiktoken(gunzipSync(ranksGz).toString('latin1'), specials, LLAMA3_SPLIT_PATTERN);
  return new TiktokenTextTokenizer('llama3', encoder, specials, specials['<|begin_of_text|>'] ?? null);
}

function buildOpenAi(name: 'cl100k_base' | 'o200k_base'): TiktokenTextTokenizer {
  const extra = CHATML_SPECIALS[name];
  const encoder = get_encoding(name, extra);
  const specials: Record<string, number> = { ...extra };
  for (const [bytes, id] of specialsOf(encoder)) specials[bytes] = id;
  return new TiktokenTextTokenizer(name, encoder, specials, null);
}

/** The encoding's own special tokens (<|endoftext|> ...), read back from the encoder rather than hard-coded. */
function specialsOf(encoder: Tiktoken): Array<[string, number]> {
  const known = ['<|endoftext|>', '<|fim_prefix|>', '<|fim_middle|>', '<|fim_suffix|>', '<|endofprompt|>'];
  const out: Array<[string, number]> = [];
  for (const text of known) {
    const ids = encoder.encode(text, 'all', []);
    if (ids.length === 1 && ids[0] !== undefined) out.push([text, ids[0]]);
  }
  return out;
}

const tiktokenCache = new Map<TokenizerName, TiktokenTextTokenizer>();
const fastCache = new Map<TokenizerRef, TextTokenizer>();

/** True for a Hugging Face tokenizer directory reference (an absolute path), false for a built-in name. */
export function isDirRef(ref: TokenizerRef): boolean {
  return ref.startsWith('/');
}

/** tiktoken alone (no JS split, no piece cache): the exactness baseline for tests and benchmarks. */
export function getTiktokenTokenizer(name: TokenizerName): TextTokenizer {
  return tiktokenOf(name);
}

function tiktokenOf(name: TokenizerName): TiktokenTextTokenizer {
  let tokenizer = tiktokenCache.get(name);
  if (tokenizer === undefined) {
    tokenizer = name === 'llama3' ? buildLlama3() : buildOpenAi(name);
    tiktokenCache.set(name, tokenizer);
  }
  return tokenizer;
}

/**
 * A built-in name or a tokenizer directory's absolute path. Built once per reference per thread, then cached for
 * the life of the thread (the WASM heap is never freed; a directory's tables are kept).
 */
export function getTokenizer(ref: TokenizerRef): TextTokenizer {
  let tokenizer = fastCache.get(ref);
  if (tokenizer === undefined) {
    if (isDirRef(ref)) tokenizer = loadDirTokenizer(ref);
    else {
      const name = ref as TokenizerName;
      const bpe = tiktokenOf(name);
      // llama3 and cl100k_base share one split pattern; o200k_base's is different and stays on tiktoken.
      tokenizer = name === 'o200k_base' ? bpe : new SplitBpeTokenizer(bpe, LLAMA3_JS_SPLIT, bpe.specialTable);
    }
    fastCache.set(ref, tokenizer);
  }
  return tokenizer;
}
