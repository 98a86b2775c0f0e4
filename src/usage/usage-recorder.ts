// Fans each usage record out to the configured sinks. Serialises once per record. Thread: main.
import type { GatewayConfig } from '../config/schema.ts';
import { redisEndpoint } from '../quota/redis-endpoint.ts';
import { JsonlSink } from './jsonl-sink.ts';
import { RedisStreamSink } from './redis-stream-sink.ts';
import type { UsageRecord, UsageSink } from './usage-record.ts';

export class UsageRecorder {
  private readonly sinks: UsageSink[];
  private readonly needsLine: boolean;

  constructor(sinks: UsageSink[]) {
    this.sinks = sinks;
    this.needsLine = sinks.some((s) => s.recordOnly !== true);
  }

  static fromConfig(cfg: GatewayConfig): UsageRecorder {
    const sinks: UsageSink[] = [];
    for (const spec of cfg.usage.sinks) {
      if (spec.startsWith('jsonl:')) {
        sinks.push(new JsonlSink(spec.slice('jsonl:'.length)));
      } else if (spec.startsWith('redis-stream:')) {
        // the quota store's Redis (or cluster: one stream key lives in one slot); a local Redis if none is set
        const endpoint = cfg.quota.redis_url === undefined && cfg.quota.redis_cluster === undefined
          ? 'redis://127.0.0.1:6379'
          : redisEndpoint(cfg.quota.redis_url, cfg.quota.redis_cluster);
        sinks.push(new RedisStreamSink(endpoint, spec.slice('redis-stream:'.length), cfg.quota.timeout_ms));
      }
    }
    return new UsageRecorder(sinks);
  }

  /** Whether any sink is configured: with none, callers skip building the record at all. */
  get active(): boolean {
    return this.sinks.length > 0;
  }

  record(r: UsageRecord): void {
    if (this.sinks.length === 0) return;
    const line = this.needsLine ? JSON.stringify(r) + '\n' : '';
    for (let i = 0; i < this.sinks.length; i++) this.sinks[i]!.write(line, r);
  }

  async flush(): Promise<void> {
    await Promise.all(this.sinks.map((s) => s.flush()));
  }

  async close(): Promise<void> {
    await this.flush();
    await Promise.all(this.sinks.map((s) => s.close()));
  }
}
