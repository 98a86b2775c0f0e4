// redis-stream:KEY sink: XADD KEY * record <json>. Records are batched per event-loop turn into one pipeline
// (one round trip for many records at high rates). While Redis is unreachable they wait in a bounded queue
// (100,000 records, about 40 MB) and are re-sent every second; beyond the bound the oldest are dropped and
// counted, because a gateway must not grow without limit while its usage store is down.
// Thread: main. Hot path: an array push per request; the send runs once per turn.
import { createRedisClient, type RedisClient } from '../quota/redis-client.ts';
import type { RedisEndpoint } from '../quota/redis-endpoint.ts';
import type { UsageRecord, UsageSink } from './usage-record.ts';

const MAX_QUEUED = 100_000;

export class RedisStreamSink implements UsageSink {
  readonly name: string;
  dropped = 0;
  private readonly key: string;
  private readonly client: RedisClient;
  private queue: string[] = [];
  private inFlight: Promise<void> | null = null;
  private scheduled = false;
  private retryTimer: NodeJS.Timeout | null = null;

  constructor(endpoint: string | RedisEndpoint, key: string, timeoutMs: number) {
    this.name = `redis-stream:${key}`;
    this.key = key;
    this.client = createRedisClient(endpoint, { connectTimeoutMs: 1000, commandTimeoutMs: Math.max(timeoutMs, 1000) });
  }

  write(line: string, _record: UsageRecord): void {
    if (this.queue.length >= MAX_QUEUED) {
      this.queue.shift();
      this.dropped++;
    }
    // the line carries a trailing newline for JSONL sinks; the stream field does not need it
    this.queue.push(line.endsWith('\n') ? line.slice(0, -1) : line);
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(() => {
        this.scheduled = false;
        void this.send();
      });
    }
  }

  private send(): Promise<void> {
    if (this.inFlight !== null) return this.inFlight;
    if (this.queue.length === 0) return Promise.resolve();
    const batch = this.queue;
    this.queue = [];
    const pipe = this.client.pipeline();
    for (const rec of batch) pipe.xadd(this.key, '*', 'record', rec);
    this.inFlight = pipe.exec().then((results) => {
      const failed: string[] = [];
      results?.forEach(([err], i) => {
        if (err) failed.push(batch[i]!);
      });
      if (failed.length > 0) this.requeue(failed);
    }, () => {
      this.requeue(batch);
    }).finally(() => {
      this.inFlight = null;
    });
    return this.inFlight;
  }

  private requeue(batch: string[]): void {
    this.queue = batch.concat(this.queue);
    const over = this.queue.length - MAX_QUEUED;
    if (over > 0) {
      this.queue.splice(0, over);
      this.dropped += over;
    }
    if (this.retryTimer === null) {
      this.retryTimer = setTimeout(() => {
        this.retryTimer = null;
        void this.send();
      }, 1000);
      this.retryTimer.unref();
    }
  }

  get pending(): number {
    return this.queue.length;
  }

  /** Sends everything queued; resolves when Redis acknowledged it or after one failed attempt. */
  async flush(): Promise<void> {
    if (this.inFlight !== null) await this.inFlight;
    await this.send();
  }

  async close(): Promise<void> {
    await this.flush();
    if (this.retryTimer !== null) clearTimeout(this.retryTimer);
    this.client.disconnect();
  }
}
