// Runs the prompt path (chat render, segment fingerprints, BPE through the piece cache and tiktoken's WASM,
// chained block hashes) on synthetic prompts at setup, so that V8 has optimised it before the first request.
// Why: on a fresh thread the first of the overload demo's distinct ~1,500-token chat prompts costs 27-33 ms of
// CPU and the next 60 0.6-0.8 ms each (interpreted and baseline-compiled code, cold piece cache); after this
// warm-up they cost 0.2-0.3 ms each. A burst arriving then queues behind that on the tokenizer worker (src/admission/README.md,
// "The demo's burst").
// Cost: WARM_PROMPTS chat and completion prompts of ~1,500 tokens per thread and per (tokenizer, template)
// pair at startup: 50-70 ms of CPU for Llama 3.1 (`node --import tsx` a script timing warmPromptPath with
// process.cpuUsage). A throwaway encoder holds the prompts, so the thread's segment and prefix caches
// start empty; only the thread's piece cache keeps the words' pieces (common English words, digit runs:
// pieces real prompts use; it is two-generational, so they age out when unused).
// Thread: any (the acceptor's inline path and each tokenize worker). Setup only.
import { CachedPromptEncoder } from './cached-prompt-encoder.ts';
import type { PromptRefs } from './pool-refs.ts';
import type { ChatMessage, PromptWork } from './types.ts';

/**
 * Prompts encoded per (tokenizer, template) pair: enough for V8 to optimise the per-prompt functions. 24 did no
 * better on the demo's prompts (0.2-0.4 ms each after either) and cost twice the startup CPU.
 */
export const WARM_PROMPTS = 8;
const WORDS_PER_PROMPT = 900;
const WORDS = [
  'the', 'report', 'shows', 'that', 'revenue', 'grew', 'in', 'every', 'quarter', 'while', 'costs', 'fell',
  'because', 'of', 'a', 'new', 'supplier', 'and', 'better', 'routing', 'please', 'summarise', 'table', 'below',
  'with', 'each', 'figure', 'rounded', 'to', 'two', 'digits', 'customer', 'order', 'shipped', 'late', 'on',
  'Monday', 'function', 'returns', 'value', 'error', 'list', 'user', 'account', 'balance', 'was', 'updated',
];

/** The synthetic prompt of round `round`: ~1,500 Llama 3 tokens; no two rounds share a segment. */
export function warmPromptText(round: number): string {
  const parts: string[] = [];
  // A small multiplicative generator: deterministic, varied enough that no two prompts share a segment.
  let x = (round + 1) * 2654435761 >>> 0;
  for (let k = 0; k < WORDS_PER_PROMPT; k++) {
    x = Math.imul(x, 1103515245) + 12345 >>> 0;
    const w = WORDS[x % WORDS.length]!;
    parts.push((x >>> 8) % 5 === 0 ? `${w}-${(x >>> 12) % 1000},` : w);
  }
  return parts.join(' ');
}

/**
 * Encodes WARM_PROMPTS chat prompts and completion prompts for each pair in `refs` on this thread. A pair whose
 * template refuses a plain user message (a custom Jinja template) is warmed through completions alone.
 */
export function warmPromptPath(refs: readonly PromptRefs[]): void {
  const encoder = new CachedPromptEncoder(4 * 1024 * 1024);
  for (const ref of refs) {
    for (let round = 0; round < WARM_PROMPTS; round++) {
      const text = warmPromptText(round);
      const messages: ChatMessage[] = [{ role: 'user', content: text }];
      const chat: PromptWork = { tokenizer: ref.tokenizer, template: ref.template, blockSize: 16, kind: 'chat', messages, tools: null, adapter: null };
      try {
        encoder.uncachedChars(chat, null);
        encoder.measure(chat);
      } catch (err) {
        if ((err as Error).name !== 'ChatTemplateError') throw err;
      }
      encoder.measure({ tokenizer: ref.tokenizer, template: ref.template, blockSize: 16, kind: 'completion', prompt: text, adapter: null });
    }
  }
}
