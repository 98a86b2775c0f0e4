// Builds the tokenize stage the pipeline calls: the PromptTokenizer (inline on the acceptor for small prompts,
// Piscina workers for large ones, per-message token cache), with every tokenizer the pools use warmed up and
// its timings recorded in the gateway's metrics (workers report over the metrics channel).
// Thread: main. Setup only.
import type { GatewayConfig } from '../config/schema.ts';
import type { GatewayMetrics } from '../metrics/metrics.ts';
import { poolPromptRefs, poolTokenizerRefs } from './pool-refs.ts';
import { PromptTokenizer } from './prompt-tokenizer.ts';
import { checkPoolTemplates } from './template-check.ts';

/**
 * `warn` gets each representative conversation a pool's template cannot render (template-check.ts), by name;
 * the gateway still starts (those requests are served on an estimate, or answered 400 where the template raises).
 */
export async function createTokenizeStage(cfg: GatewayConfig, metrics: GatewayMetrics, warn?: (obj: object, msg: string) => void): Promise<PromptTokenizer> {
  for (const p of checkPoolTemplates(cfg.pools)) {
    warn?.({ component: 'tokenize', pool: p.pool, conversation: p.conversation, reason: p.reason }, `pool ${p.pool}: the chat template cannot render the "${p.conversation}" conversation (${p.reason}): ${p.message}`);
  }
  return PromptTokenizer.create(cfg.tokenizer, {
    tokenizers: poolTokenizerRefs(cfg.pools), warm: poolPromptRefs(cfg.pools),
    inlineObserver: metrics.thread.tokenizeInline, trackCache: metrics.thread.trackTokenizerCache,
    metricsChannel: metrics.workerChannel,
  });
}
