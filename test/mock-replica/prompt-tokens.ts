// Turns a parsed completion request into prompt token ids and chained block hashes for the engine, with the
// gateway's own tokenizer, chat template and block hasher (src/tokenize/), so the mock's prefix cache and
// the gateway's routing hints key blocks identically. Thread: main (mock process). Per request, once; the
// cost is tokenization of the message segments not in the per-process segment cache (a repeated system
// prompt is free) plus one xxhash64 per 16-token block not in the prefix-hash cache.
import { initBlockHasher } from '../../src/tokenize/block-hash.ts';
import { CachedPromptEncoder } from '../../src/tokenize/cached-prompt-encoder.ts';
import type { EncodedPrompt } from '../../src/tokenize/types.ts';
import { getTokenizer } from '../../src/tokenize/tokenizer.ts';
import type { CompletionRequest } from './completion-request.ts';

export type PromptTokens = EncodedPrompt;

/** 32 MiB of segment tokens and prefix hashes per mock process. */
const CACHE_BYTES = 32 * 1024 * 1024;
let encoder: CachedPromptEncoder | null = null;

/** Builds the Llama 3 tokenizer and the WASM hasher (~1 s, once per process); await before promptTokens(). */
export async function initPromptTokens(): Promise<void> {
  await initBlockHasher();
  getTokenizer('llama3');
  encoder ??= new CachedPromptEncoder(CACHE_BYTES);
}

/** Throws ChatTemplateError (src/tokenize/chat-template.ts) for messages the template rejects: a 400. */
export function promptTokens(req: CompletionRequest, blockSize: number, adapter: string | null): PromptTokens {
  if (encoder === null) throw new Error('initPromptTokens() must be awaited first');
  return encoder.encode({
    tokenizer: 'llama3', template: 'llama3.1', blockSize, kind: req.kind,
    messages: req.messages, tools: req.tools, prompt: req.prompt, adapter,
  });
}
