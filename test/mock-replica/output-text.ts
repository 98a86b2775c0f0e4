// Deterministic output of the mock: how many tokens a request generates and which words they are.
// Thread: main (mock process). On the mock's per-token path: one array read per token, no allocation beyond
// the word string that is already interned.
//
// Length rule (documented in README): `ignore_eos` → exactly maxTokens; else a length drawn from a
// splitmix32 stream seeded by the request's `seed` (or by a hash of the prompt tokens when no seed is sent),
// mixed with the replica's --seed, log-uniform in [MIN_NATURAL_TOKENS, MAX_NATURAL_TOKENS], then capped at
// maxTokens. A request whose natural length reaches maxTokens finishes with 'length', else with 'stop'.

/** 64 words that are each exactly one Llama 3 token with their leading space (checked with the tokenizer). */
const WORDS: readonly string[] = [
  ' the', ' of', ' and', ' to', ' in', ' is', ' that', ' for', ' it', ' as', ' was', ' with', ' be', ' by', ' on',
  ' not', ' this', ' are', ' or', ' from', ' at', ' which', ' but', ' have', ' an', ' they', ' you', ' were',
  ' there', ' been', ' one', ' all', ' we', ' their', ' has', ' would', ' when', ' if', ' so', ' no', ' will',
  ' more', ' can', ' out', ' up', ' about', ' into', ' only', ' other', ' time', ' some', ' could', ' them',
  ' what', ' its', ' than', ' then', ' new', ' two', ' like', ' first', ' any', ' may', ' after',
];
/** The last token of a naturally stopped output (EOS is not shown, as vLLM skips special tokens). */
const STOP_TEXT = '.';

export const MIN_NATURAL_TOKENS = 8;
export const MAX_NATURAL_TOKENS = 512;

/** splitmix32: tiny, fast, good enough to spread seeds; returns a uint32. */
export function mix32(x: number): number {
  let z = (x + 0x9e3779b9) | 0;
  z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
  z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
  return (z ^ (z >>> 16)) >>> 0;
}

/** FNV-1a over token ids, used as the seed when the request sends none. */
export function hashTokens(tokens: ArrayLike<number>): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < tokens.length; i++) h = Math.imul(h ^ (tokens[i]! >>> 0), 0x01000193);
  return h >>> 0;
}

export interface OutputPlan {
  outputTokens: number;
  finishReason: 'stop' | 'length';
  /** Seed of the word stream. */
  wordSeed: number;
}

export function planOutput(maxTokens: number, ignoreEos: boolean, requestSeed: number, replicaSeed: number): OutputPlan {
  const wordSeed = mix32(requestSeed ^ mix32(replicaSeed));
  if (ignoreEos) return { outputTokens: maxTokens, finishReason: 'length', wordSeed };
  const u = mix32(wordSeed ^ 0x5bd1e995) / 0x1_0000_0000;
  const natural = Math.round(Math.exp(Math.log(MIN_NATURAL_TOKENS) + u * Math.log(MAX_NATURAL_TOKENS / MIN_NATURAL_TOKENS)));
  if (natural >= maxTokens) return { outputTokens: maxTokens, finishReason: 'length', wordSeed };
  return { outputTokens: natural, finishReason: 'stop', wordSeed };
}

/** Text of token `index` of a plan: a word, or '.' for the last token of a naturally stopped output. */
export function tokenText(plan: OutputPlan, index: number): string {
  if (plan.finishReason === 'stop' && index === plan.outputTokens - 1) return STOP_TEXT;
  return WORDS[mix32(plan.wordSeed + index) & 63]!;
}

/** The whole output text (non-streaming responses). */
export function fullText(plan: OutputPlan, tokens: number): string {
  let out = '';
  for (let i = 0; i < tokens; i++) out += tokenText(plan, i);
  return out;
}
