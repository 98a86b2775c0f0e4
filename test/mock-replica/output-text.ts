// Deterministic output of the mock: how many tokens a request generates and which words they are.
// Thread: main (mock process). On the mock's per-token path: one array read per token, no allocation beyond
// the word string that is already interned.
//
// Length rule (documented in README): `ignore_eos` → exactly maxTokens; else a length drawn from a
// splitmix32 stream seeded by the request's `seed` (or by a hash of the prompt tokens when no seed is sent),
// mixed with the replica's --seed, log-uniform in [MIN_NATURAL_TOKENS, MAX_NATURAL_TOKENS], then capped at
// maxTokens. A request whose natural length reaches maxTokens finishes with 'length', else with 'stop'.
// Words: a chat reply's first token has no leading space (a real model's first token after the assistant
// header, and what the chat template's trim leaves when the reply comes back in the next turn); every other
// word is one token with its leading space. A naturally stopped output's last sampled token is EOS
// (`<|eot_id|>`), whose text is empty, as vLLM skips special tokens in the text; '.' precedes it. So the text
// re-tokenizes to exactly the ids sampled (reply-hashes.ts relies on it).

/** 64 words that are each exactly one Llama 3 token with their leading space (checked with the tokenizer). */
const WORDS: readonly string[] = [
  ' the', ' of', ' and', ' to', ' in', ' is', ' that', ' for', ' it', ' as', ' was', ' with', ' be', ' by', ' on',
  ' not', ' this', ' are', ' or', ' from', ' at', ' which', ' but', ' have', ' an', ' they', ' you', ' were',
  ' there', ' been', ' one', ' all', ' we', ' their', ' has', ' would', ' when', ' if', ' so', ' no', ' will',
  ' more', ' can', ' out', ' up', ' about', ' into', ' only', ' other', ' time', ' some', ' could', ' them',
  ' what', ' its', ' than', ' then', ' new', ' two', ' like', ' first', ' any', ' may', ' after',
];
/** 32 words for the first token of a chat reply: one Llama 3 token each, no leading space (checked with the tokenizer). */
const FIRST_WORDS: readonly string[] = [
  'The', 'It', 'This', 'In', 'A', 'We', 'Yes', 'No', 'Here', 'There', 'I', 'As', 'For', 'If', 'So', 'But',
  'When', 'One', 'All', 'On', 'At', 'To', 'What', 'That', 'Some', 'Many', 'Most', 'These', 'Each', 'Now', 'Sure', 'Well',
];
/** The token before EOS in a naturally stopped output. */
const STOP_TEXT = '.';
/** The text of the EOS token that ends a naturally stopped output (vLLM skips special tokens in the text). */
export const EOS_TEXT = '';

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
  /** Tokens sampled, EOS included for a natural stop (vLLM's completion_tokens). */
  outputTokens: number;
  finishReason: 'stop' | 'length';
  /** Seed of the word stream. */
  wordSeed: number;
  /** A chat reply: its first word has no leading space. */
  chat: boolean;
}

export function planOutput(maxTokens: number, ignoreEos: boolean, requestSeed: number, replicaSeed: number, chat = false): OutputPlan {
  const wordSeed = mix32(requestSeed ^ mix32(replicaSeed));
  if (ignoreEos) return { outputTokens: maxTokens, finishReason: 'length', wordSeed, chat };
  const u = mix32(wordSeed ^ 0x5bd1e995) / 0x1_0000_0000;
  const natural = Math.round(Math.exp(Math.log(MIN_NATURAL_TOKENS) + u * Math.log(MAX_NATURAL_TOKENS / MIN_NATURAL_TOKENS)));
  if (natural >= maxTokens) return { outputTokens: maxTokens, finishReason: 'length', wordSeed, chat };
  return { outputTokens: natural, finishReason: 'stop', wordSeed, chat };
}

/** What token `index` of a plan is: EOS, '.', or a word (its index in FIRST_WORDS or WORDS). */
export function tokenKind(plan: OutputPlan, index: number): 'eos' | 'stop' | 'first' | 'word' {
  if (plan.finishReason === 'stop') {
    if (index === plan.outputTokens - 1) return 'eos';
    if (index === plan.outputTokens - 2) return 'stop';
  }
  return index === 0 && plan.chat ? 'first' : 'word';
}

/** Text of token `index` of a plan: a word, '.' before EOS, or '' for the EOS of a naturally stopped output. */
export function tokenText(plan: OutputPlan, index: number): string {
  switch (tokenKind(plan, index)) {
    case 'eos': return EOS_TEXT;
    case 'stop': return STOP_TEXT;
    case 'first': return FIRST_WORDS[mix32(plan.wordSeed + index) & 31]!;
    case 'word': return WORDS[mix32(plan.wordSeed + index) & 63]!;
  }
}

/** Every word the mock can emit (for the tokenizer check and the id table of reply-hashes.ts). */
export const OUTPUT_WORDS: readonly string[] = [...FIRST_WORDS, ...WORDS, STOP_TEXT];

/** The whole output text (non-streaming responses). */
export function fullText(plan: OutputPlan, tokens: number): string {
  let out = '';
  for (let i = 0; i < tokens; i++) out += tokenText(plan, i);
  return out;
}
