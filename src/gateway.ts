// Composition of one gateway: builds every stage from a config, starts the registry's poller thread and the
// uWS acceptor, and returns a handle to reload or stop it. main.ts (the CLI) and the integration tests both
// start gateways through here, so tests run exactly the production wiring.
// Thread: main. Setup and shutdown only.
import type { GatewayConfig } from './config/schema.ts';
import { unreachableTargets } from './admission/reach.ts';
import { createQuotaStore } from './quota/create-quota-store.ts';
import { SharedQuotaTable } from './quota/shared-quota-table.ts';
import { tenantLimits, type QuotaStore } from './quota/types.ts';
import { ReplicaRegistry } from './registry/replica-registry.ts';
import { PrefixIndex } from './router/prefix-index.ts';
import { EventsPrefixIndex } from './router/events-prefix-index.ts';
import { KvEventsService } from './registry/kv-events/kv-events-service.ts';
import { UpstreamClient } from './upstream/upstream-client.ts';
import { UsageRecorder } from './usage/usage-recorder.ts';
import type { Services } from './pipeline/services.ts';
import { RequestPath, type PolicyFactory } from './pipeline/request-path.ts';
import { ResponseOwners } from './pipeline/response-owners.ts';
import { GatewayServer } from './server/app.ts';
import { AcceptorGroup } from './threads/acceptor-group.ts';
import { uwsIsNative } from './server/uws.ts';
import { GatewayMetrics } from './metrics/metrics.ts';
import { createLogger, type Logger, type LogLevel } from './logging/logger.ts';
import { createTokenizeStage, poolsWithNewTemplates, warnTemplateProblems } from './tokenize/tokenize-stage.ts';
import { fleetGaugeSources } from './metrics/fleet-gauges.ts';
import { ClientConnectionCounter } from './metrics/client-connections.ts';
import { FREE_PORT_ATTEMPTS, freePort } from './util/free-port.ts';
import { prefaultPages } from './util/prefault.ts';
import { startTracing } from './tracing/request-tracing.ts';
import { startEpp, type EppHandle } from './epp/epp-server.ts';

export interface StartOptions {
  env?: Record<string, string | undefined>;
  /** BroadcastChannel name for worker metrics; unique per gateway when several run in one process (tests). */
  metricsChannel?: string;
  logLevel?: LogLevel;
  logger?: Logger;
  /** Builds the routing policy (default createPolicy); tests pass a recording policy. */
  routingPolicy?: PolicyFactory;
}

export interface Gateway {
  readonly port: number;
  readonly url: string;
  readonly services: Services;
  readonly registry: ReplicaRegistry;
  /** The KV-event subscriber (routing.prefix_index: events), else null. */
  readonly kvEvents: KvEventsService | null;
  readonly metrics: GatewayMetrics;
  readonly log: Logger;
  /** The endpoint picker's gRPC listener (config `epp`), else null. */
  readonly epp: { readonly port: number } | null;
  /** Completion requests in flight (the acceptor's count). */
  readonly inflightCount: number;
  /** Applies a new config: membership, tenants, routing, models. The listen address does not change. */
  reload(cfg: GatewayConfig): Promise<void>;
  /** Stops accepting, lets in-flight requests finish up to graceMs, flushes usage sinks, stops threads. */
  close(graceMs?: number): Promise<void>;
}

export async function startGateway(cfg: GatewayConfig, opts: StartOptions = {}): Promise<Gateway> {
  const env = opts.env ?? {};
  const log = opts.logger ?? createLogger(opts.logLevel ?? 'info');
  if (!uwsIsNative) log.warn({}, 'uWebSockets.js native binary did not load; running on its slow JS fallback');
  // Spans come from the threads that run the request path: this one, or each acceptor thread (its own exporter).
  const tracing = cfg.server.threads > 1 ? null : startTracing(cfg, env, (message) => log.warn({ component: 'tracing' }, message));
  const metrics = new GatewayMetrics(cfg, opts.metricsChannel ? { workerChannel: opts.metricsChannel } : {});
  const registry = await ReplicaRegistry.start(cfg, {
    metricsChannel: metrics.workerChannel,
    log: (level, message) => log[level]({ component: 'registry' }, message),
  });
  // Acceptor threads with the memory backend decide quota themselves over one shared table (src/quota/README.md).
  const sharedQuota = cfg.server.threads > 1 && cfg.quota.backend === 'memory' ? SharedQuotaTable.create(cfg.tenants.map(tenantLimits)) : null;
  let quota: QuotaStore;
  try {
    quota = await createQuotaStore(cfg.quota, {
      ...(sharedQuota !== null ? { sharedTable: sharedQuota } : {}),
      onRedisError: (err) => log.warn({ component: 'quota', err: err.message }, 'redis error'),
      onStateChange: (up, detail) => log[up ? 'info' : 'error']({ component: 'quota' }, `redis ${up ? 'back' : 'down'}: ${detail}`),
    });
  } catch (err) {
    await registry.close();
    throw err;
  }
  const tokenizer = await createTokenizeStage(cfg, metrics, (obj, msg) => log.warn(obj, msg));
  const upstream = new UpstreamClient(cfg.upstream);
  const usage = UsageRecorder.fromConfig(cfg);
  // One prefix index for the gateway's life: a reload rebuilds the policy, not what the fleet has cached.
  const approximateIndex = new PrefixIndex({ entries: cfg.routing.prefix_index_entries, slots: registry.ledger.slots });
  // Its pages are faulted in now, not one per new block under a burst's decisions (src/util/prefault.ts).
  prefaultPages(approximateIndex.buffer);
  // routing.prefix_index: events: a subscriber thread keeps an exact index from the replicas' KV events; the
  // router reads it for replicas whose stream is live and the approximate one for the rest.
  let kvEvents: KvEventsService | null = null;
  try {
    kvEvents = await KvEventsService.start(cfg, registry, (message) => log.error({ component: 'kv-events' }, message));
  } catch (err) {
    await Promise.allSettled([registry.close(), quota.close(), tokenizer.close(), upstream.close(), usage.close()]);
    throw err;
  }
  const prefixIndex = kvEvents === null ? approximateIndex : new EventsPrefixIndex(approximateIndex.buffer, kvEvents.index.buffer);
  // Which replica stored each Responses API response (this thread's requests): kept across reloads.
  const responses = new ResponseOwners();
  const path = new RequestPath(cfg, {
    env, registry, prefixIndex, quota, tokenizer, upstream, usage, responses, metrics, log, routingPolicy: opts.routingPolicy, tracing,
  });
  // Targets an idle replica cannot meet are served best effort (src/admission/README.md): say so once per pool and tier.
  const warnReach = (c: GatewayConfig): void => {
    for (const u of unreachableTargets(c)) log.warn({ component: 'admission', pool: u.pool, tier: u.tier }, u.message);
  };
  warnReach(cfg);
  // A restarted replica's cache is empty: the router forgets what it believed the replica held, and the
  // responses it stored are gone.
  registry.onRestart((slot) => {
    kvEvents?.restarted(slot);
    path.services.router.replicaReset(slot);
    responses.replicaRestarted(registry.replica(slot).id);
  });

  metrics.setSources({
    ...fleetGaugeSources(registry, () => path.services.cfg),
    tokenizerQueueDepth: () => tokenizer.queueDepth(),
    prefixIndexEntries: () => prefixIndex.entries(),
    prefixIndexEvictions: () => prefixIndex.evictions(),
    ...(kvEvents !== null ? { kvEvents: kvEvents.metricSources() } : {}),
  });

  // server.threads > 1: acceptor threads run the request path over this thread's registry, prefix index,
  // tokenizer pool, quota store and usage sinks (src/threads/README.md); this thread accepts nothing.
  let front: Front;
  try {
    front = cfg.server.threads > 1
      ? await AcceptorGroup.start({ cfg, env, registry, prefixIndex, quota, sharedQuota, tokenizer, usage, metrics, log, logLevel: opts.logLevel ?? (log.level as LogLevel) })
      : await singleThread(cfg, path, registry, metrics);
  } catch (err) {
    await Promise.allSettled([registry.close(), quota.close(), tokenizer.close(), upstream.close(), usage.close(), kvEvents?.close()]);
    throw err;
  }
  const port = front.port;
  // Every acceptor thread listens on this one port in this process, so one count covers them all.
  const connections = await ClientConnectionCounter.open(port);
  metrics.setSources({ clientConnections: () => connections.count() });
  log.info({ host: cfg.server.host, port, policy: cfg.routing.policy, quota: cfg.quota.backend, threads: cfg.server.threads }, 'gateway listening');

  let closed = false;
  let epp: EppHandle | null = null;
  const gateway: Gateway = {
    port,
    url: `http://${cfg.server.host}:${port}`,
    get services() {
      return path.services;
    },
    registry,
    kvEvents,
    metrics,
    log,
    get epp() {
      return epp;
    },
    get inflightCount() {
      return front.inflightCount;
    },
    async reload(file: GatewayConfig): Promise<void> {
      // A pool whose replicas Kubernetes reports keeps them, whatever the file lists (src/epp/).
      const next = epp !== null ? epp.withDiscovered(file) : file;
      const prev = path.services.cfg;
      const gone = goneUrls(prev, next);
      const kept = new Set(next.pools.flatMap((p) => p.replicas.map((r) => r.id)));
      const left = prev.pools.flatMap((p) => p.replicas.filter((r) => !kept.has(r.id)).map((r) => registry.slotOf(r.id))).filter((s) => s >= 0);
      // First, as it can fail (the shared table's headroom used up): the reload is then refused, nothing applied.
      sharedQuota?.assign(next.tenants.map(tenantLimits));
      registry.reload(next);
      kvEvents?.sync(next);
      // Removed replicas: their connection pools close once the requests still on them finish.
      for (const url of gone) void upstream.forget(url);
      metrics.reconfigure(next);
      const services = path.reload(next);
      warnReach(next);
      warnTemplateProblems(poolsWithNewTemplates(prev.pools, next.pools), (obj, msg) => log.warn(obj, msg));
      for (const slot of left) services.router.replicaReset(slot);
      await front.reload(services, left);
      log.info({ replicas: next.pools.reduce((n, p) => n + p.replicas.length, 0) }, 'config reloaded');
    },
    async close(graceMs = cfg.server.shutdown_grace_ms): Promise<void> {
      if (closed) return;
      closed = true;
      await Promise.all([front.close(graceMs), epp?.close(graceMs)]);
      await usage.close();
      await tracing?.shutdown().catch((err: unknown) => log.warn({ component: 'tracing', err }, 'trace export at shutdown failed'));
      await Promise.allSettled([registry.close(), quota.close(), tokenizer.close(), upstream.close(), kvEvents?.close()]);
      metrics.close();
      await connections.close();
      log.flush();
    },
  };
  if (cfg.epp !== undefined) {
    // Endpoint-picker mode: Envoy's ext_proc over the same request path (src/epp/README.md).
    try {
      epp = await startEpp(cfg.epp, { services: () => path.services, registry, log, reload: (c) => gateway.reload(c) });
    } catch (err) {
      await gateway.close(0);
      throw err;
    }
  }
  return gateway;
}

/** What accepts connections: this thread's uWS app, or the acceptor threads. */
interface Front {
  readonly port: number;
  readonly inflightCount: number;
  reload(services: Services, leftSlots: number[]): Promise<void>;
  close(graceMs: number): Promise<void>;
}

async function singleThread(cfg: GatewayConfig, path: RequestPath, registry: ReplicaRegistry, metrics: GatewayMetrics): Promise<Front> {
  const services = (): Services => path.services;
  const server = new GatewayServer(services(), {
    metricsText: async () => ({ contentType: metrics.contentType, body: await metrics.render() }),
    ready: () => services().cfg.pools.every((p) => registry.candidates(p.id).some((s) => registry.isHealthy(s))),
    listenPaused: () => metrics.listenPaused(),
  });
  metrics.setSources({ inflight: () => server.inflightCount, admissionQueueDepth: () => path.admission.queueDepths() });
  // Port 0 (tests): bind a port picked first, so the listen guard can bind it again (util/free-port.ts).
  let port = 0;
  for (let attempt = 1; port === 0; attempt++) {
    try {
      port = await server.listen(cfg.server.host, cfg.server.port !== 0 ? cfg.server.port : await freePort(cfg.server.host));
    } catch (err) {
      if (cfg.server.port !== 0 || attempt >= FREE_PORT_ATTEMPTS) {
        server.closeConnections();
        throw err;
      }
    }
  }
  return {
    port,
    get inflightCount() {
      return server.inflightCount;
    },
    async reload(s) {
      server.setServices(s);
    },
    // The idle keep-alive connections too: left open, a client's pooled socket outlives the server (until uWS's
    // 10 s idle timeout), and an embedding process's loop cannot end.
    async close(graceMs) {
      await server.shutdown(graceMs);
      server.closeConnections();
    },
  };
}

/** Replica urls in `prev` that `next` no longer has. */
function goneUrls(prev: GatewayConfig, next: GatewayConfig): Set<string> {
  const gone = new Set(prev.pools.flatMap((p) => p.replicas.map((r) => r.url)));
  for (const p of next.pools) for (const r of p.replicas) gone.delete(r.url);
  return gone;
}
