// Chooses the quota backend from config: the in-memory store (private, or a view of the process's shared table
// when acceptor threads decide quota themselves), or Redis behind the failure policy.
// Thread: main, setup only.
import { MemoryQuotaStore } from './memory-quota-store.ts';
import { createRedisClient, type RedisClient } from './redis-client.ts';
import { redisEndpoint } from './redis-endpoint.ts';
import { RedisQuotaStore } from './redis-quota-store.ts';
import { ResilientQuotaStore } from './resilient-quota-store.ts';
import { SharedQuotaStore } from './shared-quota-store.ts';
import type { SharedQuotaTable } from './shared-quota-table.ts';
import type { QuotaStore } from './types.ts';
import type { GatewayConfig } from '../config/schema.ts';

export interface CreateQuotaStoreOptions {
  /** How long startup waits for Redis before starting under the failure policy (default 2,000 ms). */
  readyTimeoutMs?: number;
  /** Redis connection errors (for the log); never called with key material. */
  onRedisError?: (err: Error) => void;
  /** Redis found down / back, for the log and metrics. */
  onStateChange?: (up: boolean, detail: string) => void;
  /**
   * The process's shared memory table (server.threads > 1, memory backend): the store is then a view of it,
   * like every acceptor thread's, instead of a private MemoryQuotaStore.
   */
  sharedTable?: SharedQuotaTable;
}

export async function createQuotaStore(cfg: GatewayConfig['quota'], opts: CreateQuotaStoreOptions = {}): Promise<QuotaStore> {
  if (cfg.backend === 'memory') {
    const t = opts.sharedTable;
    return t !== undefined ? new SharedQuotaStore(t, t.liveSlots, { leaseTtlMs: cfg.lease_ttl_ms }) : new MemoryQuotaStore({ leaseTtlMs: cfg.lease_ttl_ms });
  }
  const client = createRedisClient(redisEndpoint(cfg.redis_url, cfg.redis_cluster), {
    connectTimeoutMs: Math.max(1000, cfg.timeout_ms),
    commandTimeoutMs: cfg.timeout_ms,
    ...(opts.onRedisError ? { onError: opts.onRedisError } : {}),
  });
  const primary = new RedisQuotaStore(client, { keyPrefix: cfg.key_prefix, leaseTtlMs: cfg.lease_ttl_ms });
  // Not fatal: a gateway started during a Redis outage serves under the failure policy and recovers by itself.
  await waitReady(client, opts.readyTimeoutMs ?? 2000);
  return new ResilientQuotaStore(primary, {
    failureMode: cfg.failure_mode,
    leaseTtlMs: cfg.lease_ttl_ms,
    // quota.expected_gateways: each gateway admits 1/N of a tenant's limits locally while failing open.
    expectedGateways: cfg.expected_gateways,
    ...(opts.onStateChange ? { onStateChange: opts.onStateChange } : {}),
  });
}

function waitReady(client: RedisClient, timeoutMs: number): Promise<boolean> {
  if (client.status === 'ready') return Promise.resolve(true);
  return new Promise((resolve) => {
    const done = (ok: boolean): void => {
      clearTimeout(timer);
      client.off('ready', onReady);
      resolve(ok);
    };
    const onReady = (): void => done(true);
    const timer = setTimeout(() => done(false), timeoutMs);
    client.once('ready', onReady);
  });
}
