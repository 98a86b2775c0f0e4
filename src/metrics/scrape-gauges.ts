// Gauges whose values are pulled at scrape time from the components that own them (replica table, tokenizer
// pool, pipeline) and from the main thread's event-loop delay monitor.
// Thread: main. Never on the request path: each collect callback runs once per GET /metrics.
// A source that is not set yet (component not started) reports nothing (labelled gauges) or 0 (scalars);
// a source that throws leaves a labelled gauge without samples and a scalar at NaN for that scrape.
import type { IntervalHistogram } from 'node:perf_hooks';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { ClientConnectionCounts } from './client-connections.ts';
import type { BoundedLabel } from './labels.ts';
import { defineKvEventsGauges, type KvEventsSource } from './kv-events-gauges.ts';

/** Pulled at scrape time; each is optional and may be set or replaced at any time. */
export interface MetricSources {
  replicaStalenessSeconds?: () => Iterable<[replicaId: string, seconds: number]>;
  replicaUp?: () => Iterable<[replicaId: string, up: 0 | 1]>;
  tokenizerQueueDepth?: () => number;
  inflight?: () => number;
  kvOccupancy?: () => Iterable<[pool: string, ratio: number]>;
  admissionQueueDepth?: () => Iterable<[pool: string, depth: number]>;
  /** The GPU-time model's learned figures per replica (src/gpu-time/): prefill tokens/s, decode step base and per sequence (s). */
  gpuPrefillRate?: () => Iterable<[replicaId: string, tokensPerSecond: number]>;
  gpuDecodeBase?: () => Iterable<[replicaId: string, seconds: number]>;
  gpuDecodePerSeq?: () => Iterable<[replicaId: string, seconds: number]>;
  /** The reply-length model's median forecast against finished replies, per pool: |error| / length over its last 256, median and p90. */
  replyLengthErrorP50?: () => Iterable<[pool: string, ratio: number]>;
  replyLengthErrorP90?: () => Iterable<[pool: string, ratio: number]>;
  /** The router's prefix index: occupied entries, and live entries replaced so far (a running total). */
  prefixIndexEntries?: () => number;
  prefixIndexEvictions?: () => number;
  /** Client connections on the listen port, from the kernel's socket tables (client-connections.ts). */
  clientConnections?: () => Promise<ClientConnectionCounts>;
  /** The KV-event subscriber's per-replica figures (routing.prefix_index: events). */
  kvEvents?: KvEventsSource;
}

export interface ScrapeGaugeContext {
  readonly registry: Registry;
  readonly sources: () => MetricSources;
  /** Current bounded label sets (they change on config reload). */
  readonly replicas: () => BoundedLabel;
  readonly pools: () => BoundedLabel;
  /** Reset by the caller after each scrape, so the gauges cover one scrape interval. */
  readonly loopDelay: IntervalHistogram;
}

export function defineScrapeGauges(ctx: ScrapeGaugeContext): void {
  const reg = ctx.registry;
  const labelled = <L extends string>(
    name: string, help: string, label: L, bound: () => BoundedLabel,
    pick: () => (() => Iterable<[string, number]>) | undefined, merge: (a: number, b: number) => number,
    aggregator: 'sum' | 'average' = 'sum',
  ): void => {
    const g: Gauge<L> = new Gauge({
      name, help, labelNames: [label] as const, registers: [reg], aggregator,
      collect: () => {
        g.reset();
        const src = pick();
        if (!src) return;
        const labels = bound();
        const byLabel = new Map<string, number>(); // unknown ids share "other": keep the worst value
        try {
          for (const [id, v] of src()) {
            const value = labels.label(id);
            const prev = byLabel.get(value);
            byLabel.set(value, prev === undefined ? v : merge(prev, v));
          }
        } catch {
          return; // a failing source leaves its gauge empty for this scrape rather than failing /metrics
        }
        for (const [value, v] of byLabel) g.set({ [label]: value } as Record<L, string>, v);
      },
    });
  };
  labelled('gateway_replica_table_staleness_seconds', 'Age of the newest successful scrape in the replica table, per replica.',
    'replica', ctx.replicas, () => ctx.sources().replicaStalenessSeconds, Math.max);
  labelled('gateway_replica_up', '1 when the replica is healthy in the replica table, else 0.',
    'replica', ctx.replicas, () => ctx.sources().replicaUp, Math.min);
  labelled('gateway_pool_kv_occupancy_ratio', 'KV-cache block occupancy (0-1) of each pool, from the replica table.',
    'pool', ctx.pools, () => ctx.sources().kvOccupancy, Math.max);
  labelled('gateway_admission_queue_depth', 'Requests waiting in the admission queue of each pool.',
    'pool', ctx.pools, () => ctx.sources().admissionQueueDepth, (a, b) => a + b);

  // One model per acceptor thread: each thread's page is averaged, not summed, on the main thread's.
  labelled('gateway_gpu_prefill_tokens_per_second', "Each replica's prefill rate as the GPU-time model has learned it from first tokens.",
    'replica', ctx.replicas, () => ctx.sources().gpuPrefillRate, Math.min, 'average');
  labelled('gateway_gpu_decode_step_base_seconds', "Each replica's decode step at batch 0 and no context, as the GPU-time model has learned it.",
    'replica', ctx.replicas, () => ctx.sources().gpuDecodeBase, Math.max, 'average');
  labelled('gateway_gpu_decode_step_per_seq_seconds', "Each replica's decode step cost per sequence in the batch, as the GPU-time model has learned it.",
    'replica', ctx.replicas, () => ctx.sources().gpuDecodePerSeq, Math.max, 'average');

  labelled('gateway_reply_length_prediction_error_p50_ratio',
    "Median over each pool's last 256 finished replies of |predicted - actual| / actual, the reply-length model's median forecast at dispatch.",
    'pool', ctx.pools, () => ctx.sources().replyLengthErrorP50, Math.max, 'average');
  labelled('gateway_reply_length_prediction_error_p90_ratio',
    "90th percentile over each pool's last 256 finished replies of |predicted - actual| / actual, the reply-length model's median forecast at dispatch.",
    'pool', ctx.pools, () => ctx.sources().replyLengthErrorP90, Math.max, 'average');

  const scalar = (name: string, help: string, pick: () => (() => number) | undefined): void => {
    const g: Gauge = new Gauge({
      name, help, registers: [reg],
      collect: () => {
        const f = pick();
        try {
          g.set(f ? f() : 0);
        } catch {
          g.set(Number.NaN); // unknown, rather than a plausible 0 or a failed /metrics
        }
      },
    });
  };
  scalar('gateway_tokenizer_queue_depth', 'Tokenize tasks waiting for a tokenizer pool thread.', () => ctx.sources().tokenizerQueueDepth);
  scalar('gateway_inflight_requests', 'Completion requests in flight in this gateway.', () => ctx.sources().inflight);
  scalar('gateway_prefix_index_entries', "Occupied entries of the router's prefix index (block hash → holders).", () => ctx.sources().prefixIndexEntries);
  // The index counts evictions itself (shared by every thread); the counter follows its running total.
  let evictionsSeen = 0;
  const evictions: Counter = new Counter({
    name: 'gateway_prefix_index_evictions_total', help: "Live prefix-index entries replaced by the bucket's least recently used rule.", registers: [reg],
    collect: () => {
      const f = ctx.sources().prefixIndexEvictions;
      if (!f) return;
      const total = f();
      if (total > evictionsSeen) evictions.inc(total - evictionsSeen);
      evictionsSeen = total;
    },
  });

  defineKvEventsGauges(reg, () => ctx.sources().kvEvents, ctx.replicas);

  // One read of the socket tables gives both states. A failed read leaves the family without samples.
  const conns: Gauge<'state'> = new Gauge({
    name: 'gateway_client_connections',
    help: 'Client TCP connections on the listen port: accepted (the gateway holds them) or queued (handshake done, waiting to be accepted).',
    labelNames: ['state'] as const, registers: [reg],
    collect: async () => {
      conns.reset();
      const f = ctx.sources().clientConnections;
      if (!f) return;
      try {
        const c = await f();
        conns.set({ state: 'accepted' }, c.accepted);
        conns.set({ state: 'queued' }, c.queued);
      } catch {
        // unknown this scrape: no samples rather than a plausible 0
      }
    },
  });

  // Three gauges rather than one with a "quantile" label: promtool reserves that label for summaries.
  const window = 'since the previous scrape (perf_hooks monitorEventLoopDelay, 10 ms resolution)';
  const loop = (name: string, help: string, read: (h: IntervalHistogram) => number): void => {
    const h = ctx.loopDelay;
    // Percentiles of an empty histogram are meaningless: report 0.
    const g: Gauge = new Gauge({ name, help, registers: [reg], collect: () => g.set(h.count > 0 ? read(h) / 1e9 : 0) });
  };
  loop('gateway_event_loop_delay_p50_seconds', `Median main-thread event-loop delay ${window}.`, (h) => h.percentile(50));
  loop('gateway_event_loop_delay_p99_seconds', `p99 main-thread event-loop delay ${window}.`, (h) => h.percentile(99));
  loop('gateway_event_loop_delay_max_seconds', `Largest main-thread event-loop delay ${window}.`, (h) => h.max);
}
