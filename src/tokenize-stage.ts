// Builds the tokenize stage the pipeline calls. Until the Piscina-backed PromptTokenizer (src/tokenize/
// prompt-tokenizer.ts) is wired, tokenization runs inline on the acceptor with the exact tokenizer, template
// and block hasher. Thread: main. Setup, then per request.
import type { GatewayConfig } from './config/schema.ts';
import type { TokenizeStage } from './pipeline/services.ts';
import { getTokenizer } from './tokenize/tokenizer.ts';
import { chatPromptTokens, completionPromptTokens } from './tokenize/prompt.ts';
import { blockHashes, initBlockHasher } from './tokenize/block-hash.ts';
import type { ChatMessage } from './tokenize/chat-template.ts';

export interface TokenizeService extends TokenizeStage {
  queueDepth(): number;
  close(): Promise<void>;
}

export async function createTokenizeStage(_cfg: GatewayConfig): Promise<TokenizeService> {
  await initBlockHasher();
  return {
    async tokenize(req, signal) {
      if (signal?.aborted) throw signal.reason as Error;
      const tokenizer = getTokenizer(req.pool.tokenizer);
      const ids = req.kind === 'chat'
        ? chatPromptTokens(tokenizer, req.pool.chat_template, req.messages as ChatMessage[])
        : completionPromptTokens(tokenizer, req.prompt!);
      return { promptTokens: ids.length, blockHashes: blockHashes(ids, req.pool.block_size, req.adapter) };
    },
    queueDepth: () => 0,
    close: async () => undefined,
  };
}
