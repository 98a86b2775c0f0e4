// Turns a parsed completion request into prompt token ids and chained block hashes for the engine, with the
// gateway's own tokenizer, chat template and block hasher (src/tokenize/), so the mock's prefix cache and
// the gateway's routing hints key blocks identically. Thread: main (mock process). Per request, once; the
// cost is tokenization of the prompt (tiktoken WASM) plus one xxhash64 per 16-token block.
import { blockHashes, initBlockHasher } from '../../src/tokenize/block-hash.ts';
import { chatPromptTokens, completionPromptTokens } from '../../src/tokenize/prompt.ts';
import { getTokenizer, type TextTokenizer } from '../../src/tokenize/tokenizer.ts';
import type { CompletionRequest } from './completion-request.ts';

export interface PromptTokens {
  tokens: Uint32Array;
  blockHashes: Float64Array;
}

let tokenizer: TextTokenizer | null = null;

/** Builds the Llama 3 tokenizer and the WASM hasher; await once before promptTokens(). */
export async function initPromptTokens(): Promise<void> {
  await initBlockHasher();
  tokenizer ??= getTokenizer('llama3');
}

export function promptTokens(req: CompletionRequest, blockSize: number, adapter: string | null): PromptTokens {
  if (tokenizer === null) throw new Error('initPromptTokens() must be awaited first');
  const tokens = req.kind === 'chat' ? chatPromptTokens(tokenizer, 'llama3.1', req.messages) : completionPromptTokens(tokenizer, req.prompt);
  return { tokens, blockHashes: blockHashes(tokens, blockSize, adapter) };
}
