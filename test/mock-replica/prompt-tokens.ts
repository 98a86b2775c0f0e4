// Turns a parsed completion request into prompt token ids and chained block hashes for the engine, with the
// gateway's own tokenizer, chat template and block hasher (src/tokenize/), so the mock's prefix cache and
// the gateway's routing hints key blocks identically. By default the model is Llama 3.1 (the built-in llama3
// tokenizer and llama3.1 template); `--tokenizer DIR` makes it any model: that Hugging Face tokenizer directory
// and the chat template it ships, as vLLM would count, cache and hash that model's prompts.
// Thread: main (mock process). Per request, once; the cost is tokenization of the message segments not in the
// per-process segment cache (a repeated system prompt is free) plus one xxhash64 per 16-token block not in the
// prefix-hash cache. Setup: the tokenizer is built and its prompt path warmed (50-70 ms of CPU for Llama 3.1).
import { initBlockHasher } from '../../src/tokenize/block-hash.ts';
import { CachedPromptEncoder } from '../../src/tokenize/cached-prompt-encoder.ts';
import { checkPoolTokenizer, promptRefs, type PromptRefs } from '../../src/tokenize/pool-refs.ts';
import type { EncodedPrompt } from '../../src/tokenize/types.ts';
import { getTokenizer } from '../../src/tokenize/tokenizer.ts';
import { warmPromptPath } from '../../src/tokenize/warm-code.ts';
import type { CompletionRequest } from './completion-request.ts';

export type PromptTokens = EncodedPrompt;

/** 32 MiB of segment tokens and prefix hashes per mock process. */
const CACHE_BYTES = 32 * 1024 * 1024;
let encoder: CachedPromptEncoder | null = null;
let refs: PromptRefs = { tokenizer: 'llama3', template: 'llama3.1' };

/**
 * Builds the tokenizer (Llama 3 unless `tokenizerDir` names a Hugging Face tokenizer directory: 1-10 s for the
 * large vocabularies) and the WASM hasher, once per process; await before promptTokens(). Rejects with a
 * message naming the problem when the directory or its chat template does not load.
 */
export async function initPromptTokens(tokenizerDir?: string): Promise<void> {
  await initBlockHasher();
  if (tokenizerDir !== undefined) {
    const pool = { tokenizer: { path: tokenizerDir }, chat_template: 'auto' };
    checkPoolTokenizer(pool);
    const next = promptRefs(pool);
    // The encoder is per process: two in-process replicas must not count with different models.
    if (encoder !== null && next.tokenizer !== refs.tokenizer) throw new Error(`this process's mock replicas already use ${refs.tokenizer}: start a ${tokenizerDir} replica in its own process (npm run mock -- --tokenizer DIR)`);
    refs = next;
  } else if (encoder !== null && refs.tokenizer !== 'llama3') {
    throw new Error(`this process's mock replicas already use ${refs.tokenizer}: start a Llama replica in its own process`);
  }
  getTokenizer(refs.tokenizer);
  if (encoder === null) {
    encoder = new CachedPromptEncoder(CACHE_BYTES);
    // The prompt path optimised by V8 before the first request (src/tokenize/warm-code.ts): a cold mock spends
    // 20-30 ms of CPU on each of its first distinct ~1,500-token prompts, and on a machine that also runs the
    // gateway that CPU is taken from it (the overload demo's burst: the fleet used 270-340 ms of CPU while
    // the gateway answered its 429s, 80-140 ms once warm). A GPU server would not share the gateway's cores.
    warmPromptPath([refs]);
  }
}

/** Throws ChatTemplateError (src/tokenize/chat-template.ts) for messages the template rejects: a 400. */
export function promptTokens(req: CompletionRequest, blockSize: number, adapter: string | null): PromptTokens {
  if (encoder === null) throw new Error('initPromptTokens() must be awaited first');
  return encoder.encode({
    tokenizer: refs.tokenizer, template: refs.template, blockSize, kind: req.kind,
    messages: req.messages, tools: req.tools, prompt: req.prompt, adapter,
  });
}
