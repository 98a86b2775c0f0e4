// Metrics that more than one thread records: tokenization (inline on main, or in a Piscina worker) and
// replica scrapes (poller thread). Defined once here; both GatewayMetrics (main) and WorkerMetrics (workers)
// build them from this function, so the definitions the aggregator merges are identical by construction.
// Thread: any. Recording is hot-path-adjacent (once per tokenize task / scrape): cached children only.
import { getHeapStatistics } from 'node:v8';
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
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
  /** Registers one encoder's cache size (bytes) to be read at scrape time: nothing is recorded per request. */
  trackTokenizerCache(bytes: () => number): void;
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
  // Read only when scraped: the encoders' own byte counts (byte-lru.ts estimates), summed over this thread's
  // encoders here and over threads by the aggregator (a gauge sums). Lets an operator, and the soak, tell a
  // cache filling to its bound (tokenizer.cache_bytes) from a leak.
  const cacheSources: Array<() => number> = [];
  new Gauge({
    name: 'gateway_tokenizer_cache_bytes',
    help: 'Bytes held by the tokenizer token and block-hash caches (estimate), over every thread; bounded by tokenizer.cache_bytes.',
    registers: [registry],
    collect() {
      let total = 0;
      for (const f of cacheSources) total += f();
      this.set(total);
    },
  });
  // Each thread reports its own V8 heap at scrape time and the aggregator sums them: the main thread's
  // prom-client default heap gauges see only the main thread, so worker heaps (tokenizer caches, the poller's
  // parse buffers) would otherwise hide inside RSS. One getHeapStatistics() call per scrape per thread.
  new Gauge({
    name: 'gateway_threads_heap_used_bytes',
    help: 'V8 heap in use, summed over every gateway thread (main, acceptors, tokenizer workers, replica poller).',
    registers: [registry],
    collect() {
      this.set(getHeapStatistics().used_heap_size);
    },
  });
  // What the heaps hold from the OS (committed pages, used or not) and what V8 knows is held outside them
  // (ArrayBuffer backing stores, WASM memories, malloc'd by V8 itself): with the used gauge above, this is how
  // RSS splits into V8's share and the native rest. Three more fields of the same getHeapStatistics() call.
  new Gauge({
    name: 'gateway_threads_memory_bytes',
    help: 'V8 memory summed over every gateway thread, by kind: heap_committed (heap pages held, in use or not), external (ArrayBuffers, WASM memories), malloced (V8\'s own malloc).',
    labelNames: ['kind'] as const,
    registers: [registry],
    collect() {
      const s = getHeapStatistics();
      this.set({ kind: 'heap_committed' }, s.total_heap_size);
      this.set({ kind: 'external' }, s.external_memory);
      this.set({ kind: 'malloced' }, s.malloced_memory);
    },
  });
  return {
    trackTokenizerCache: (bytes) => { cacheSources.push(bytes); },
    tokenizeInline: histogramChild(tokenize, 'inline'),
    tokenizePool: histogramChild(tokenize, 'pool'),
    scrapeSeconds,
    scrapes: { ok: counterChild(scrapes, 'ok'), error: counterChild(scrapes, 'error'), timeout: counterChild(scrapes, 'timeout') },
  };
}
