// Builds the tokenizer for a Hugging Face tokenizer directory: the fast byte-level BPE path when the model's
// normalizer and pre-tokenizer allow it (hf-pre-tokenizer.ts decides), else @huggingface/tokenizers
// (hf-library.ts). Also what both share: the BOS a completions prompt gets, and where a rendered chat prompt may
// be cut into independently tokenized segments.
// Thread: any; setup only (each thread builds each directory once; tokenizer.ts caches it).
import { AddedTokenMatcher } from './added-tokens.ts';
import { ByteLevelBpeTokenizer } from './byte-level-bpe.ts';
import { readTokenizerDir, type AddedTokenSpec, type HfTokenizerFiles } from './hf-dir.ts';
import { LibraryTokenizer } from './hf-library.ts';
import { UnsupportedPattern, fastPathPlan, type FastPathPlan } from './hf-pre-tokenizer.ts';
import type { TextTokenizer } from './types.ts';

type Json = Record<string, unknown>;

/** Which implementation serves a directory, and why the fast path does not when it does not. */
export interface TokenizerKind {
  kind: 'byte-level-bpe' | 'library';
  /** The model's type as tokenizer.json names it (BPE, Unigram, WordPiece, …). */
  modelType: string;
  reason: string | null;
}

function planOf(files: HfTokenizerFiles): { plan: FastPathPlan | null; reason: string | null } {
  if (files.addedTokens.some((t) => t.singleWord)) return { plan: null, reason: 'added tokens with single_word' };
  try {
    return { plan: fastPathPlan(files.tokenizer), reason: null };
  } catch (err) {
    if (err instanceof UnsupportedPattern) return { plan: null, reason: err.message };
    throw err;
  }
}

export function tokenizerKind(dir: string): TokenizerKind {
  const files = readTokenizerDir(dir);
  const { plan, reason } = planOf(files);
  const modelType = String((files.tokenizer.model as Json).type ?? 'BPE');
  return { kind: plan === null ? 'library' : 'byte-level-bpe', modelType, reason };
}

/** Tokenizer classes whose add_bos_token in tokenizer_config.json rebuilds the post-processor (transformers). */
const BOS_FROM_CONFIG = new Set(['LlamaTokenizer', 'LlamaTokenizerFast', 'CodeLlamaTokenizer', 'CodeLlamaTokenizerFast', 'GemmaTokenizer', 'GemmaTokenizerFast']);

/**
 * The id a string prompt gets in front with add_special_tokens=True (vLLM's completions): for Llama and Gemma
 * tokenizer classes, bos_token when add_bos_token (default true); for the others, the special token the
 * post-processor's TemplateProcessing puts before the sequence (Llama 3's <|begin_of_text|>), or none (Qwen,
 * gpt-oss). Exported for tests.
 */
export function completionBosId(files: HfTokenizerFiles, idOf: (token: string) => number | undefined): number | null {
  const cls = files.config.tokenizer_class;
  if (typeof cls === 'string' && BOS_FROM_CONFIG.has(cls)) {
    if (files.config.add_bos_token === false) return null;
    const bos = files.specialTokens.bos_token;
    return bos === undefined ? null : idOf(bos) ?? null;
  }
  const template = templateProcessing(files.tokenizer.post_processor);
  if (template === null) return null;
  const first = (template.single as Json[] | undefined)?.[0];
  const special = first?.SpecialToken as Json | undefined;
  if (special === undefined || typeof special.id !== 'string') return null;
  const entry = (template.special_tokens as Record<string, { ids?: number[] }> | undefined)?.[special.id];
  return entry?.ids?.[0] ?? idOf(special.id) ?? null;
}

function templateProcessing(node: unknown): Json | null {
  if (typeof node !== 'object' || node === null) return null;
  const n = node as Json;
  if (n.type === 'TemplateProcessing') return n;
  if (n.type === 'Sequence' && Array.isArray(n.processors)) {
    for (const p of n.processors as unknown[]) {
      const t = templateProcessing(p);
      if (t !== null) return t;
    }
  }
  return null;
}

/**
 * The added tokens before which a rendered prompt can be cut: HF splits every added token out of the text before
 * normalizing and pre-tokenizing, so the text on either side of one is tokenized on its own. Every added token is
 * a cut, special or not (DeepSeek's <｜User｜> is not "special"; Gemma's "\n" lets a long system prompt be cached
 * paragraph by paragraph), except lstrip ones (they eat the whitespace before them). The scan for cuts is then
 * HF's own leftmost-longest scan over the same tokens, but for the lstrip ones left out: when one of those could
 * overlap a cut token, a cut might fall inside it, so the prompt is not cut at all (null).
 */
export function segmentCutScanner(added: readonly AddedTokenSpec[]): AddedTokenMatcher | null {
  const cuts = added.filter((t) => !t.lstrip && t.content.length > 0);
  if (cuts.length === 0) return null;
  // Sets of the cut tokens and of all their prefixes: O(added tokens × length²) rather than × cut tokens.
  const whole = new Set(cuts.map((t) => t.content));
  const prefixes = new Set<string>();
  for (const t of cuts) for (let i = 1; i <= t.content.length; i++) prefixes.add(t.content.slice(0, i));
  // When every added token is a cut, scanning for cuts is HF's own leftmost-longest scan: nothing to check.
  for (const n of added) {
    if (!n.lstrip) continue;
    for (let k = 1; k < n.content.length; k++) {
      const tail = n.content.slice(k);
      if (prefixes.has(tail)) return null;
      for (let i = 1; i < tail.length; i++) if (whole.has(tail.slice(0, i))) return null;
    }
  }
  return new AddedTokenMatcher(cuts.map((t) => ({ content: t.content })));
}

/** Builds the directory's tokenizer (0.3-3 s and 20-150 MB depending on the model: see the README). */
export function loadDirTokenizer(dir: string): TextTokenizer {
  const files = readTokenizerDir(dir);
  const model = files.tokenizer.model as Json;
  const { plan } = planOf(files);
  const cut = segmentCutScanner(files.addedTokens);
  if (plan === null) {
    const vocab = model.vocab;
    const idOf = (token: string): number | undefined => files.addedTokens.find((t) => t.content === token)?.id
      ?? (Array.isArray(vocab) ? undefined : (vocab as Record<string, number>)[token]);
    return new LibraryTokenizer(files.dir, files, completionBosId(files, idOf), cut);
  }
  const vocabIds = new Map<string, number>(Object.entries(model.vocab as Record<string, number>));
  const vocab: string[] = [];
  for (const [token, id] of vocabIds) vocab[id] = token;
  for (const t of files.addedTokens) vocab[t.id] = t.content;
  const merges: Array<[number, number, number]> = [];
  for (const m of (model.merges ?? []) as Array<string | [string, string]>) {
    let a: string;
    let b: string;
    if (typeof m === 'string') {
      const sp = m.indexOf(' ');
      a = m.slice(0, sp);
      b = m.slice(sp + 1);
    } else [a, b] = m;
    const ia = vocabIds.get(a);
    const ib = vocabIds.get(b);
    const im = vocabIds.get(a + b);
    if (ia === undefined || ib === undefined || im === undefined) throw new Error(`${files.dir}: merge "${a} ${b}" names a token missing from the vocabulary`);
    merges.push([ia, ib, im]);
  }
  const idOf = (token: string): number | undefined => files.addedTokens.find((t) => t.content === token)?.id ?? vocabIds.get(token);
  return new ByteLevelBpeTokenizer({
    name: files.dir, plan, vocab, vocabIds, merges, ignoreMerges: model.ignore_merges === true,
    addedTokens: files.addedTokens, bosId: completionBosId(files, idOf), specialTokens: files.specialTokens,
    segmentCut: cut,
  });
}
