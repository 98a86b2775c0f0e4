// Prompt token ids exactly as vLLM computes them, for chat and completions requests.
// Thread: any (gateway acceptor, tokenize worker, mock replica). Hot path: the tokenizer call dominates.
// Pure functions with no request-level cache (the tokenizer's piece cache is invisible): the cached path
// (cached-prompt-encoder.ts) must give the same ids, and test/unit/tokenize/*.test.ts hold it to these.
// `shouldStop` is polled during long encodes (see TextTokenizer.encodeWithSpecials).
import { renderPromptSegments } from './prompt-template.ts';
import type { ChatMessage, ChatTemplateRef, TextTokenizer } from './types.ts';

/** Concatenates token arrays into one Uint32Array. */
export function concatTokens(parts: readonly Uint32Array[]): Uint32Array {
  let length = 0;
  for (const p of parts) length += p.length;
  const out = new Uint32Array(length);
  let offset = 0;
  for (const p of parts) {
    out.set(p, offset);
    offset += p.length;
  }
  return out;
}

/**
 * Chat prompt: the template's rendered text tokenized with special-token parsing and no added BOS (the
 * template writes <|begin_of_text|> itself; vLLM passes add_special_tokens=False). Tokenized segment by
 * segment, which equals tokenizing the joined text (see chat-template.ts).
 */
export function chatPromptTokens(
  tokenizer: TextTokenizer,
  template: ChatTemplateRef,
  messages: readonly ChatMessage[],
  shouldStop: (() => boolean) | null = null,
  tools: readonly unknown[] | null = null,
): Uint32Array {
  const segments = renderPromptSegments(template, messages, tools, tokenizer);
  return concatTokens(segments.map((s) => tokenizer.encodeWithSpecials(s, shouldStop)));
}

/**
 * Completions prompt: a string is tokenized with add_special_tokens=True (BOS first when the model has
 * one, special-token text parsed, so a prompt that already starts with <|begin_of_text|> gets two, as in
 * vLLM); a token-id array is taken as is.
 */
export function completionPromptTokens(
  tokenizer: TextTokenizer,
  prompt: string | readonly number[],
  shouldStop: (() => boolean) | null = null,
): Uint32Array {
  if (typeof prompt !== 'string') return Uint32Array.from(prompt);
  const body = tokenizer.encodeWithSpecials(prompt, shouldStop);
  if (tokenizer.bosId === null) return body;
  const out = new Uint32Array(body.length + 1);
  out[0] = tokenizer.bosId;
  out.set(body, 1);
  return out;
}
