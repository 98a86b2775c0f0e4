// Reply lengths per pool, learned from this gateway thread's finished streams (reply-table.ts has the model,
// src/gpu-time/README.md "Reply lengths" the why). The pipeline asks for a forecast when it builds a request's
// route request (before admission), and reports the stream's length when it finished with a reply (stop or
// length); a stream cut short (client gone, replica lost, an error) teaches nothing, since its length is not
// a reply's. The simulator does the same from its engines' finishes.
// Thread: the acceptor. forecast(): a Map lookup (the pool), one for the tenant's bucket (cached per name), a
// table read; finished(): 4 × 69 multiplications.
import type { GatewayConfig } from '../../config/schema.ts';
import { ReplyForecast } from './reply-forecast.ts';
import { ReplyTable, TENANTS } from './reply-table.ts';

export type ReplyRoute = 'chat' | 'completions' | 'responses';

/** Tenant names seen, with their bucket; cleared past this many (a bounded cache, not a registry). */
const TENANT_CACHE = 4096;

export class ReplyLengths {
  private readonly tables = new Map<string, ReplyTable>();
  private readonly tenants = new Map<string, number>();

  constructor(pools: GatewayConfig['pools']) {
    this.reconfigure(pools);
  }

  /** New pools get a table; a kept pool keeps what it learned and takes its new prior. */
  reconfigure(pools: GatewayConfig['pools']): void {
    for (const p of pools) {
      const t = this.tables.get(p.id);
      if (t === undefined) this.tables.set(p.id, new ReplyTable(p.id, p.typical_reply_tokens));
      else t.setPrior(p.typical_reply_tokens);
    }
  }

  table(poolId: string): ReplyTable | undefined {
    return this.tables.get(poolId);
  }

  /**
   * The forecast for a request to `poolId`. `cap` is its max_tokens per sequence, `capSent` false when the
   * client sent none (the gateway's default or the context's room stands in). Unknown pool: the cap itself.
   */
  forecast(poolId: string, route: ReplyRoute, tenant: string | null, promptTokens: number, cap: number, capSent: boolean, out = new ReplyForecast()): ReplyForecast {
    const t = this.tables.get(poolId);
    if (t === undefined) {
      out.table = null;
      out.cap = out.kvTokens = out.slackTokens = out.meanTokens = out.medianTokens = cap;
      return out;
    }
    return t.forecast(route === 'chat' ? 0 : route === 'completions' ? 1 : 2, this.tenantBucket(tenant), promptTokens, cap, capSent, out);
  }

  /** The request's stream finished with a reply of `tokens` per sequence: its pool learns it. */
  finished(f: ReplyForecast, tokens: number): void {
    if (f.table instanceof ReplyTable) f.table.observe(f, tokens);
  }

  /** Per pool, the median forecast's absolute error over its last 256 finished streams: median and p90, as shares. */
  *errorQuantiles(): Iterable<[pool: string, p50: number, p90: number]> {
    for (const t of this.tables.values()) {
      const n = t.errorCount < t.errors.length ? t.errorCount : t.errors.length;
      if (n === 0) continue;
      const s = t.errors.slice(0, n).sort();
      yield [t.poolId, s[Math.floor(0.5 * (n - 1))]!, s[Math.floor(0.9 * (n - 1))]!];
    }
  }

  private tenantBucket(tenant: string | null): number {
    if (tenant === null) return 0;
    let b = this.tenants.get(tenant);
    if (b !== undefined) return b;
    // FNV-1a over the name's UTF-16 units, folded to TENANTS buckets.
    let h = 0x811c9dc5;
    for (let i = 0; i < tenant.length; i++) h = Math.imul(h ^ tenant.charCodeAt(i), 0x01000193);
    b = (h >>> 0) % TENANTS;
    if (this.tenants.size >= TENANT_CACHE) this.tenants.clear();
    this.tenants.set(tenant, b);
    return b;
  }
}

/** The error figures as the metrics layer's scrape-time sources (gateway_reply_length_prediction_error_*_ratio). */
export function replyErrorSources(lengths: ReplyLengths): {
  replyLengthErrorP50: () => Iterable<[string, number]>;
  replyLengthErrorP90: () => Iterable<[string, number]>;
} {
  return {
    replyLengthErrorP50: function* () {
      for (const [pool, p50] of lengths.errorQuantiles()) yield [pool, p50];
    },
    replyLengthErrorP90: function* () {
      for (const [pool, , p90] of lengths.errorQuantiles()) yield [pool, p90];
    },
  };
}
