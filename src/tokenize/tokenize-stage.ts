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
  if (warn !== undefined) warnTemplateProblems(cfg.pools, warn);
  return PromptTokenizer.create(cfg.tokenizer, {
    tokenizers: poolTokenizerRefs(cfg.pools), warm: poolPromptRefs(cfg.pools),
    inlineObserver: metrics.thread.tokenizeInline, trackCache: metrics.thread.trackTokenizerCache,
    metricsChannel: metrics.workerChannel,
  });
}

type Pool = GatewayConfig['pools'][number];

/** One warning per representative conversation a pool's template cannot render (template-check.ts). */
export function warnTemplateProblems(pools: readonly Pool[], warn: (obj: object, msg: string) => void): void {
  for (const p of checkPoolTemplates(pools)) {
    warn({ component: 'tokenize', pool: p.pool, conversation: p.conversation, reason: p.reason }, `pool ${p.pool}: the chat template cannot render the "${p.conversation}" conversation (${p.reason}): ${p.message}`);
  }
}

/**
 * The pools of a reloaded config whose tokenizer or chat template is new or changed: requests read the
 * current config's pool, so a reload's template serves the next request, and it is checked as at startup.
 * Unchanged pools are not checked again (their warnings were given).
 */
export function poolsWithNewTemplates(prev: readonly Pool[], next: readonly Pool[]): Pool[] {
  const key = (p: Pool): string => JSON.stringify([p.tokenizer, p.chat_template ?? null]);
  const before = new Map(prev.map((p) => [p.id, key(p)]));
  return next.filter((p) => before.get(p.id) !== key(p));
}
