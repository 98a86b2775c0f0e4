// Main-thread side of metrics aggregation: keeps each worker's latest registry snapshot and, at scrape time,
// asks every worker for a fresh one over the metrics BroadcastChannel, waiting at most timeoutMs.
// Thread: main. Never on the request path: runs inside GatewayMetrics.render() only.
// A worker that misses MAX_MISSED collects in a row (dead, or stuck in a long task) is no longer waited for;
// its last snapshot stays in the page so its counters never go backwards, and it rejoins on its next answer.
// One silent for retireAfterMissed collects is gone for good (a live worker also pushes every 5 s): its
// snapshot is folded into one "retired" sum, so pools that recycle threads do not grow this map forever.
// Worker registries hold only counters and histograms, for which folding by summation is exact.
import { BroadcastChannel } from 'node:worker_threads';
import { AggregatorRegistry } from 'prom-client';
import { METRICS_CHANNEL_NAME, type MetricsChannelMessage, type MetricsSnapshot } from './worker-metrics.ts';

const MAX_MISSED = 3;

export interface WorkerCollectorOptions {
  listen: boolean;
  timeoutMs: number;
  channelName?: string;
  /** Collects without any message before a worker's snapshot is folded into the retired sum. Default 20. */
  retireAfterMissed?: number;
}

export class WorkerCollector {
  private readonly snapshots = new Map<string, MetricsSnapshot>();
  private readonly missed = new Map<string, number>();
  private retired: MetricsSnapshot | null = null;
  private readonly channel: BroadcastChannel | null;
  private readonly timeoutMs: number;
  private readonly retireAfterMissed: number;
  private seq = 0;
  private pending: { seq: number; waiting: Set<string>; done: () => void } | null = null;

  constructor(opts: WorkerCollectorOptions) {
    const { listen, timeoutMs, channelName = METRICS_CHANNEL_NAME } = opts;
    this.timeoutMs = timeoutMs;
    this.retireAfterMissed = Math.max(MAX_MISSED, opts.retireAfterMissed ?? 20);
    this.channel = listen ? new BroadcastChannel(channelName) : null;
    if (this.channel) {
      this.channel.unref();
      this.channel.onmessage = (ev: unknown) => this.onMessage((ev as { data?: MetricsChannelMessage }).data);
      this.post(0); // workers started before us announce themselves
    }
  }

  absorb(workerId: string, metrics: MetricsSnapshot): void {
    this.snapshots.set(workerId, metrics);
    this.missed.set(workerId, 0);
  }

  /** Every snapshot to merge: live and recently silent workers, plus the retired sum. */
  all(): MetricsSnapshot[] {
    const out = [...this.snapshots.values()];
    if (this.retired) out.push(this.retired);
    return out;
  }

  /** Resolves when every live worker answered, or after timeoutMs; never rejects. */
  async collect(): Promise<void> {
    await this.ask();
    for (const [id, n] of this.missed) {
      if (n < this.retireAfterMissed) continue;
      const snap = this.snapshots.get(id);
      this.snapshots.delete(id);
      this.missed.delete(id);
      if (snap) this.retired = await AggregatorRegistry.aggregate(this.retired ? [this.retired, snap] : [snap]).getMetricsAsJSON();
    }
  }

  private ask(): Promise<void> {
    if (!this.channel || this.pending) return Promise.resolve();
    // Count this collect against every known worker up front; any message from one resets its count.
    const waiting = new Set<string>();
    for (const [id, n] of this.missed) {
      if (n < MAX_MISSED) waiting.add(id);
      this.missed.set(id, n + 1);
    }
    const seq = ++this.seq;
    // Always ask: a worker we have not heard from yet answers too, and is waited for from the next scrape on.
    if (waiting.size === 0) {
      this.post(seq);
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.pending = null;
        resolve();
      };
      const timer = setTimeout(done, this.timeoutMs);
      this.pending = { seq, waiting, done };
      this.post(seq);
    });
  }

  private post(seq: number): void {
    const msg: MetricsChannelMessage = { type: 'collect', seq };
    this.channel?.postMessage(msg);
  }

  close(): void {
    this.channel?.close();
    this.pending?.done();
  }

  private onMessage(msg: MetricsChannelMessage | undefined): void {
    if (msg?.type !== 'snapshot') return;
    this.absorb(msg.workerId, msg.metrics);
    const p = this.pending;
    if (p && msg.seq === p.seq) {
      p.waiting.delete(msg.workerId);
      if (p.waiting.size === 0) p.done();
    }
  }
}
