// Worker-thread side of metrics aggregation. Each worker (Piscina tokenizer, replica poller) owns a private
// prom-client Registry; it answers the main thread's "collect" requests on a BroadcastChannel with
// register.getMetricsAsJSON(), and also pushes a snapshot every pushIntervalMs as a fallback, so a busy
// worker's numbers are at most that old. GatewayMetrics.render() merges the snapshots with AggregatorRegistry.
// Thread: worker threads (never main). Recording is one cached-child call; snapshots cost ~50 µs per scrape.
import { BroadcastChannel, threadId } from 'node:worker_threads';
import { Registry } from 'prom-client';
import { defineThreadMetrics, type ScrapeResult, type ThreadMetrics } from './thread-metrics.ts';

/** The channel name every gateway thread uses for metrics traffic. */
export const METRICS_CHANNEL_NAME = 'expediter:metrics';

/** A registry's metrics as JSON: what Registry.getMetricsAsJSON() returns, structured-cloneable. */
export type MetricsSnapshot = Awaited<ReturnType<Registry['getMetricsAsJSON']>>;

/** Messages on METRICS_CHANNEL_NAME. `seq` 0 marks an unsolicited (periodic) push. */
export type MetricsChannelMessage =
  | { type: 'collect'; seq: number }
  | { type: 'snapshot'; seq: number; workerId: string; metrics: MetricsSnapshot };

export interface WorkerMetricsOptions {
  /** Stable id for this worker's numbers; default `thread-<threadId>`. */
  workerId?: string;
  /** Unsolicited snapshot interval; 0 disables. Default 5,000 ms. */
  pushIntervalMs?: number;
  /** The owning GatewayMetrics' `workerChannel` (pass it in workerData); default METRICS_CHANNEL_NAME. */
  channelName?: string;
}

export class WorkerMetrics {
  readonly workerId: string;
  readonly registry = new Registry();
  private readonly m: ThreadMetrics;
  private readonly channel: BroadcastChannel;
  private readonly timer: NodeJS.Timeout | null;

  constructor(opts: WorkerMetricsOptions = {}) {
    this.workerId = opts.workerId ?? `thread-${threadId}`;
    this.m = defineThreadMetrics(this.registry);
    this.channel = new BroadcastChannel(opts.channelName ?? METRICS_CHANNEL_NAME);
    this.channel.unref();
    this.channel.onmessage = (ev: unknown) => {
      const msg = (ev as { data?: MetricsChannelMessage }).data;
      if (msg?.type === 'collect') void this.publish(msg.seq);
    };
    const pushIntervalMs = opts.pushIntervalMs ?? 5000;
    this.timer = pushIntervalMs > 0 ? setInterval(() => void this.publish(0), pushIntervalMs).unref() : null;
    void this.publish(0); // announce ourselves so the main thread waits for us on its next scrape
  }

  /** A tokenize task's run time inside this worker. */
  tokenized(seconds: number): void {
    this.m.tokenizePool.observe(seconds);
  }

  /** This worker's tokenizer cache size, read when a snapshot is taken. */
  trackTokenizerCache(bytes: () => number): void {
    this.m.trackTokenizerCache(bytes);
  }

  /** One replica scrape by the poller. */
  scraped(seconds: number, result: ScrapeResult): void {
    this.m.scrapeSeconds.observe(seconds);
    this.m.scrapes[result].inc();
  }

  /** This worker's metrics as JSON, for GatewayMetrics.absorbWorker when not using the channel. */
  snapshot(): Promise<MetricsSnapshot> {
    return this.registry.getMetricsAsJSON();
  }

  close(): void {
    if (this.timer) clearInterval(this.timer);
    this.channel.close();
  }

  private async publish(seq: number): Promise<void> {
    const metrics = await this.registry.getMetricsAsJSON();
    const msg: MetricsChannelMessage = { type: 'snapshot', seq, workerId: this.workerId, metrics };
    try {
      this.channel.postMessage(msg);
    } catch {
      // channel closed between the request and our answer (worker shutting down): nothing to report
    }
  }
}

/** Convenience for workers that only need a snapshot of a registry they built themselves. */
export function workerMetricsSnapshot(registry: Registry): Promise<MetricsSnapshot> {
  return registry.getMetricsAsJSON();
}
