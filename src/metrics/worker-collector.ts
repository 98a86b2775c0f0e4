// Main-thread side of metrics aggregation: keeps each worker's latest registry snapshot and, at scrape time,
// asks every worker for a fresh one over the metrics BroadcastChannel, waiting at most timeoutMs.
// Thread: main. Never on the request path: runs inside GatewayMetrics.render() only.
// A worker that misses MAX_MISSED collects in a row (dead, or stuck in a long task) is no longer waited for;
// its last snapshot stays in the page so its counters never go backwards, and it rejoins on its next answer.
import { BroadcastChannel } from 'node:worker_threads';
import { METRICS_CHANNEL_NAME, type MetricsChannelMessage, type MetricsSnapshot } from './worker-metrics.ts';

const MAX_MISSED = 3;

export class WorkerCollector {
  readonly snapshots = new Map<string, MetricsSnapshot>();
  private readonly missed = new Map<string, number>();
  private readonly channel: BroadcastChannel | null;
  private readonly timeoutMs: number;
  private seq = 0;
  private pending: { seq: number; waiting: Set<string>; done: () => void } | null = null;

  constructor(listen: boolean, timeoutMs: number, channelName = METRICS_CHANNEL_NAME) {
    this.timeoutMs = timeoutMs;
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

  /** Resolves when every live worker answered, or after timeoutMs; never rejects. */
  collect(): Promise<void> {
    if (!this.channel || this.pending) return Promise.resolve();
    const waiting = new Set<string>();
    for (const [id, n] of this.missed) if (n < MAX_MISSED) waiting.add(id);
    const seq = ++this.seq;
    // Always ask: a worker we have not heard from yet answers too, and is waited for from the next scrape on.
    if (waiting.size === 0) {
      this.post(seq);
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        for (const id of waiting) this.missed.set(id, (this.missed.get(id) ?? 0) + 1);
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
