// QuotaStore on Redis: one EVALSHA per acquire (scripts/token-bucket.lua) and one per settle
// (scripts/settle.lua), both atomic, keys hash-tagged per tenant (keys.ts). Thread: main. Hot path: one
// round trip each; the argument arrays are the only per-call allocation besides ioredis's own.
// Clock: Redis TIME inside the scripts (ARGV now_ms = ''), so gateways with skewed clocks share one bucket
// consistently. `clock` injects now_ms instead; tests use it to drive both backends through one timeline.
// Leases this process holds are renewed every lease_ttl/3 (one EVALSHA per tenant, scripts/renew.lua), so
// a stream may outlive the TTL; a crashed process stops renewing and its leases expire one TTL later.
// Failures (timeouts, disconnects) reject: resilient-quota-store.ts decides what they mean.
import { readFileSync } from 'node:fs';
import { assertCost, DEFAULT_LEASE_DURATION_MS, toDecision } from './decision.ts';
import { TenantKeyCache } from './keys.ts';
import { closeRedisClient, defineScript, writeCoalescer, type RedisClient, type ScriptRunner } from './redis-client.ts';
import type { QuotaDecision, QuotaStore, TenantLimits } from './types.ts';

/** Each script is prelude.lua (clock + bucket refill, shared so acquire and settle cannot disagree) + its body. */
const script = (name: string): string => readFileSync(new URL('./scripts/prelude.lua', import.meta.url), 'utf8')
  + readFileSync(new URL(`./scripts/${name}`, import.meta.url), 'utf8');
const ACQUIRE_LUA = script('token-bucket.lua');
const SETTLE_LUA = script('settle.lua');
const RENEW_LUA = script('renew.lua');
/** Ids per renew call: bounds one script's run time inside Redis. */
const RENEW_BATCH = 500;

export interface RedisQuotaStoreOptions {
  /** First segment of every key (quota.key_prefix); tests use a unique one each. */
  keyPrefix: string;
  /** Lease lifetime without a settle (quota.lease_ttl_ms). */
  leaseTtlMs: number;
  /** Tests only: milliseconds since the epoch passed as now_ms instead of Redis TIME. */
  clock?: () => number;
  /** Renew this process's live leases every leaseTtlMs / 3 (at most every 250 ms) (default true; false: only renewLive()). */
  renewLeases?: boolean;
  /** One socket write per event-loop turn instead of per command (default true; see writeCoalescer). */
  coalesceWrites?: boolean;
  /** close() leaves the client open (default false: the store owns it). */
  sharedClient?: boolean;
}

export class QuotaScriptReplyError extends Error {
  override name = 'QuotaScriptReplyError';
}

export class RedisQuotaStore implements QuotaStore {
  readonly client: RedisClient;
  private readonly keys: TenantKeyCache;
  private readonly leaseTtlMs: number;
  private readonly clock: (() => number) | null;
  private readonly sharedClient: boolean;
  private readonly runAcquire: ScriptRunner;
  private readonly runSettle: ScriptRunner;
  private readonly runRenew: ScriptRunner;
  private readonly beforeWrite: () => void;
  /** Leases this process took and has not settled: request id -> tenant (what the renew timer extends). */
  private readonly live = new Map<string, TenantLimits>();
  private readonly renewTimer: NodeJS.Timeout | null;
  private renewing = false;

  constructor(client: RedisClient, opts: RedisQuotaStoreOptions) {
    this.client = client;
    this.keys = new TenantKeyCache(opts.keyPrefix);
    this.leaseTtlMs = opts.leaseTtlMs;
    this.clock = opts.clock ?? null;
    this.sharedClient = opts.sharedClient ?? false;
    this.runAcquire = defineScript(client, 'gwQuotaAcquire', ACQUIRE_LUA, 2);
    this.runSettle = defineScript(client, 'gwQuotaSettle', SETTLE_LUA, 2);
    this.runRenew = defineScript(client, 'gwQuotaRenew', RENEW_LUA, 1);
    this.beforeWrite = opts.coalesceWrites === false ? () => undefined : writeCoalescer(client);
    if (opts.renewLeases === false) {
      this.renewTimer = null;
    } else {
      this.renewTimer = setInterval(() => void this.renewLive().catch(() => undefined), Math.max(250, Math.floor(this.leaseTtlMs / 3)));
      this.renewTimer.unref();
    }
  }

  async acquire(tenant: TenantLimits, requestId: string, costTokens: number): Promise<QuotaDecision> {
    assertCost(costTokens);
    const k = this.keys.get(tenant.name);
    this.beforeWrite();
    const reply = await this.runAcquire([k.bucket, k.leases], [
      tenant.tokensPerSecond, tenant.burstTokens, costTokens, tenant.maxInflight, requestId, this.leaseTtlMs,
      this.clock === null ? '' : this.clock(), DEFAULT_LEASE_DURATION_MS,
    ]);
    if (!Array.isArray(reply) || reply.length !== 6) throw new QuotaScriptReplyError(`unexpected acquire reply: ${String(reply)}`);
    const r = reply as number[];
    if (r[0] === 1) this.live.set(requestId, tenant);
    return toDecision(tenant, r[0] === 1, r[1]!, r[2]!, r[3]!, r[4]!, r[5]!, false);
  }

  async settle(tenant: TenantLimits, requestId: string, reservedTokens: number, usedTokens: number): Promise<void> {
    await this.settleOnce(tenant, requestId, reservedTokens, usedTokens);
  }

  /** Settle, reporting whether this call was the one that settled (false: already settled, expired, unknown). */
  async settleOnce(tenant: TenantLimits, requestId: string, reservedTokens: number, usedTokens: number): Promise<boolean> {
    const k = this.keys.get(tenant.name);
    this.live.delete(requestId);
    const refund = reservedTokens > usedTokens ? reservedTokens - usedTokens : 0;
    this.beforeWrite();
    const reply = await this.runSettle([k.bucket, k.leases], [
      tenant.tokensPerSecond, tenant.burstTokens, requestId, refund, this.leaseTtlMs,
      this.clock === null ? '' : this.clock(),
    ]);
    return reply === 1;
  }

  /** Extends every live lease of this process; returns how many Redis extended. Failures reject (next tick retries). */
  async renewLive(): Promise<number> {
    if (this.renewing || this.live.size === 0) return 0;
    this.renewing = true;
    try {
      const byTenant = new Map<string, { tenant: TenantLimits; ids: string[] }>();
      for (const [id, tenant] of this.live) {
        let group = byTenant.get(tenant.name);
        if (group === undefined) byTenant.set(tenant.name, (group = { tenant, ids: [] }));
        group.ids.push(id);
      }
      const now = this.clock === null ? '' : this.clock();
      let renewed = 0;
      for (const { tenant, ids } of byTenant.values()) {
        const leases = this.keys.get(tenant.name).leases;
        for (let i = 0; i < ids.length; i += RENEW_BATCH) {
          const batch = ids.slice(i, i + RENEW_BATCH);
          const gone = await this.runRenew([leases], [this.leaseTtlMs, now, ...batch]);
          const goneIds = Array.isArray(gone) ? (gone as string[]) : [];
          // An expired or foreign-settled lease is forgotten, so a request never settled cannot pin memory.
          for (const id of goneIds) this.live.delete(id);
          renewed += batch.length - goneIds.length;
        }
      }
      return renewed;
    } finally {
      this.renewing = false;
    }
  }

  async close(): Promise<void> {
    if (this.renewTimer !== null) clearInterval(this.renewTimer);
    this.live.clear();
    if (!this.sharedClient) await closeRedisClient(this.client);
  }
}
