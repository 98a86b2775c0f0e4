// Metrics that more than one thread records: tokenization (inline on main, or in a Piscina worker) and
// replica scrapes (poller thread). Defined once here; both GatewayMetrics (main) and WorkerMetrics (workers)
// build them from this function, so the definitions the aggregator merges are identical by construction.
// Thread: any. Recording is hot-path-adjacent (once per tokenize task / scrape): cached children only.
import { Counter, Histogram, type Registry } from 'prom-client';
import { SCRAPE_BUCKETS_SECONDS, TOKENIZE_BUCKETS_SECONDS } from './buckets.ts';
import { counterChild, histogramChild, type Incrementer, type Observer } from './fast-children.ts';

export type ScrapeResult = 'ok' | 'error' | 'timeout';

export interface ThreadMetrics {
  /** Tokenize + block-hash time for prompts tokenized on the acceptor thread. */
  readonly tokenizeInline: Observer;
  /** Tokenize + block-hash time inside a Piscina worker (task run time, not queue time). */
  readonly tokenizePool: Observer;
  /** One replica /metrics scrape by the poller, success or not. */
  readonly scrapeSeconds: Observer;
  readonly scrapes: Readonly<Record<ScrapeResult, Incrementer>>;
}

export function defineThreadMetrics(registry: Registry): ThreadMetrics {
  const tokenize = new Histogram({
    name: 'gateway_tokenize_duration_seconds',
    help: 'Time to tokenize a prompt and hash its blocks, by where it ran (inline on the acceptor or in the tokenizer pool).',
    labelNames: ['kind'] as const,
    buckets: [...TOKENIZE_BUCKETS_SECONDS],
    registers: [registry],
  });
  const scrapeSeconds = new Histogram({
    name: 'gateway_replica_scrape_duration_seconds',
    help: 'Duration of one scrape of a replica /metrics endpoint by the poller thread.',
    buckets: [...SCRAPE_BUCKETS_SECONDS],
    registers: [registry],
  });
  const scrapes = new Counter({
    name: 'gateway_replica_scrapes_total',
    help: 'Replica /metrics scrapes by result (ok, error, timeout).',
    labelNames: ['result'] as const,
    registers: [registry],
  });
  return {
    tokenizeInline: histogramChild(tokenize, 'inline'),
    tokenizePool: histogramChild(tokenize, 'pool'),
    scrapeSeconds,
    scrapes: { ok: counterChild(scrapes, 'ok'), error: counterChild(scrapes, 'error'), timeout: counterChild(scrapes, 'timeout') },
  };
}
