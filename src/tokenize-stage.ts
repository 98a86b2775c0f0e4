// Builds the tokenize stage the pipeline calls: the PromptTokenizer (inline on the acceptor for small prompts,
// Piscina workers for large ones, per-message token cache), with every tokenizer the pools use warmed up.
// Thread: main. Setup only.
import type { GatewayConfig } from './config/schema.ts';
import { PromptTokenizer } from './tokenize/prompt-tokenizer.ts';

export async function createTokenizeStage(cfg: GatewayConfig): Promise<PromptTokenizer> {
  const names = [...new Set(cfg.pools.map((p) => p.tokenizer))];
  return PromptTokenizer.create(cfg.tokenizer, names);
}
