// Builds the tokenize stage the pipeline calls: the PromptTokenizer (inline on the acceptor for small prompts,
// Piscina workers for large ones, per-message token cache), with every tokenizer the pools use warmed up and
// its timings recorded in the gateway's metrics (workers report over the metrics channel).
// Thread: main. Setup only.
import type { GatewayConfig } from '../config/schema.ts';
import type { GatewayMetrics } from '../metrics/metrics.ts';
import { poolPromptRefs, poolTokenizerRefs } from './pool-refs.ts';
import { PromptTokenizer } from './prompt-tokenizer.ts';

export async function createTokenizeStage(cfg: GatewayConfig, metrics: GatewayMetrics): Promise<PromptTokenizer> {
  return PromptTokenizer.create(cfg.tokenizer, {
    tokenizers: poolTokenizerRefs(cfg.pools), warm: poolPromptRefs(cfg.pools),
    inlineObserver: metrics.thread.tokenizeInline, trackCache: metrics.thread.trackTokenizerCache,
    metricsChannel: metrics.workerChannel,
  });
}
