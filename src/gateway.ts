// Composition of one gateway: builds every stage from a config, starts the registry's poller thread and the
// uWS acceptor, and returns a handle to reload or stop it. main.ts (the CLI) and the integration tests both
// start gateways through here, so tests run exactly the production wiring.
// Thread: main. Setup and shutdown only.
import type { GatewayConfig } from './config/schema.ts';
import { AdmissionController } from './admission/admission-controller.ts';
import { KvEstimator } from './router/kv-estimate.ts';
import { WallClock } from './util/clock.ts';
import { Authenticator } from './auth/authenticate.ts';
import { createQuotaStore } from './quota/create-quota-store.ts';
import type { QuotaStore } from './quota/types.ts';
import { ReplicaRegistry } from './registry/replica-registry.ts';
import { Router, createPolicy } from './router/route.ts';
import type { FleetView, RoutingFeedback, RoutingPolicy } from './router/types.ts';
import { PrefixIndex } from './router/prefix-index.ts';
import { UpstreamClient } from './upstream/upstream-client.ts';
import { UsageRecorder } from './usage/usage-recorder.ts';
import { ModelCatalog } from './pipeline/model-catalog.ts';
import type { LogStage, Services } from './pipeline/services.ts';
import { GatewayServer } from './server/app.ts';
import { uwsIsNative } from './server/uws.ts';
import { GatewayMetrics } from './metrics/metrics.ts';
import { createLogger, type Logger, type LogLevel } from './logging/logger.ts';
import { createTokenizeStage } from './tokenize/tokenize-stage.ts';
import { fleetGaugeSources } from './metrics/fleet-gauges.ts';

export interface StartOptions {
  env?: Record<string, string | undefined>;
  /** BroadcastChannel name for worker metrics; unique per gateway when several run in one process (tests). */
  metricsChannel?: string;
  logLevel?: LogLevel;
  logger?: Logger;
  /** Builds the routing policy (default createPolicy); tests pass a recording policy. */
  routingPolicy?: (cfg: GatewayConfig, fleet: FleetView, index: PrefixIndex) => RoutingPolicy & RoutingFeedback;
}

export interface Gateway {
  readonly port: number;
  readonly url: string;
  readonly services: Services;
  readonly registry: ReplicaRegistry;
  readonly metrics: GatewayMetrics;
  readonly log: Logger;
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
  const metrics = new GatewayMetrics(cfg, opts.metricsChannel ? { workerChannel: opts.metricsChannel } : {});
  const registry = await ReplicaRegistry.start(cfg, {
    metricsChannel: metrics.workerChannel,
    log: (level, message) => log[level]({ component: 'registry' }, message),
  });
  let quota: QuotaStore;
  try {
    quota = await createQuotaStore(cfg.quota, {
      expectedGateways: cfg.quota.expected_gateways,
      onRedisError: (err) => log.warn({ component: 'quota', err: err.message }, 'redis error'),
      onStateChange: (up, detail) => log[up ? 'info' : 'error']({ component: 'quota' }, `redis ${up ? 'back' : 'down'}: ${detail}`),
    });
  } catch (err) {
    await registry.close();
    throw err;
  }
  const tokenizer = await createTokenizeStage(cfg, metrics);
  const upstream = new UpstreamClient(cfg.upstream);
  const usage = UsageRecorder.fromConfig(cfg);
  const logStage: LogStage = log;
  // One prefix index for the gateway's life: a reload rebuilds the policy, not what the fleet has cached.
  const prefixIndex = new PrefixIndex({ entries: cfg.routing.prefix_index_entries, slots: registry.ledger.slots });

  const newRouter = (c: GatewayConfig): Router => new Router((opts.routingPolicy ?? createPolicy)(c, registry, prefixIndex), registry);
  // One admission controller for the gateway's life: requests waiting in its queues hold callbacks into it,
  // so a reload reconfigures it in place. upstream.connections_per_replica is the client's, fixed at start.
  const firstRouter = newRouter(cfg);
  const admission = new AdmissionController({
    fleet: registry, kv: new KvEstimator(registry, registry.ledger.slots, cfg.admission.stale_ms), router: firstRouter,
    clock: WallClock, cfg: cfg.admission, connectionsPerReplica: cfg.upstream.connections_per_replica,
    pollMs: cfg.registry.scrape_interval_ms, metrics,
    onCallbackError: (err) => log.error({ err }, 'admission callback failed'),
  });
  const build = (c: GatewayConfig, router: Router): Services => {
    admission.reconfigure({ cfg: c.admission, router, connectionsPerReplica: cfg.upstream.connections_per_replica, pollMs: c.registry.scrape_interval_ms });
    return Object.freeze({
      cfg: c,
      catalog: new ModelCatalog(c),
      auth: new Authenticator(c.tenants, env),
      quota,
      tokenizer,
      registry,
      router,
      admission,
      upstream,
      usage,
      metrics,
      log: logStage,
    });
  };
  let services = build(cfg, firstRouter);
  // A restarted replica's cache is empty: the router forgets what it believed the replica held.
  registry.onRestart((slot) => services.router.replicaReset(slot));

  metrics.setSources({
    ...fleetGaugeSources(registry, () => services.cfg),
    tokenizerQueueDepth: () => tokenizer.queueDepth(),
    inflight: () => server.inflightCount,
    admissionQueueDepth: () => admission.queueDepths(),
    prefixIndexEntries: () => prefixIndex.entries(),
    prefixIndexEvictions: () => prefixIndex.evictions(),
  });

  const ready = (): boolean => services.cfg.pools.every((p) => registry.candidates(p.id).some((s) => registry.isHealthy(s)));
  const server = new GatewayServer(services, {
    metricsText: async () => ({ contentType: metrics.contentType, body: await metrics.render() }),
    ready,
  });
  let port: number;
  try {
    port = await server.listen(cfg.server.host, cfg.server.port);
  } catch (err) {
    await Promise.allSettled([registry.close(), quota.close(), tokenizer.close(), upstream.close(), usage.close()]);
    throw err;
  }
  log.info({ host: cfg.server.host, port, policy: cfg.routing.policy, quota: cfg.quota.backend }, 'gateway listening');

  let closed = false;
  return {
    port,
    url: `http://${cfg.server.host}:${port}`,
    get services() {
      return services;
    },
    registry,
    metrics,
    log,
    get inflightCount() {
      return server.inflightCount;
    },
    async reload(next: GatewayConfig): Promise<void> {
      const before = new Set(services.cfg.pools.flatMap((p) => p.replicas.map((r) => r.url)));
      for (const p of next.pools) for (const r of p.replicas) before.delete(r.url);
      const kept = new Set(next.pools.flatMap((p) => p.replicas.map((r) => r.id)));
      const left = services.cfg.pools.flatMap((p) => p.replicas.filter((r) => !kept.has(r.id)).map((r) => registry.slotOf(r.id)));
      registry.reload(next);
      // Removed replicas: their connection pools close once the requests still on them finish.
      for (const url of before) void upstream.forget(url);
      metrics.reconfigure(next);
      services = build(next, newRouter(next));
      for (const slot of left) if (slot >= 0) services.router.replicaReset(slot);
      server.setServices(services);
      log.info({ replicas: next.pools.reduce((n, p) => n + p.replicas.length, 0) }, 'config reloaded');
    },
    async close(graceMs = cfg.server.shutdown_grace_ms): Promise<void> {
      if (closed) return;
      closed = true;
      await server.shutdown(graceMs);
      await usage.close();
      await Promise.allSettled([registry.close(), quota.close(), tokenizer.close(), upstream.close()]);
      metrics.close();
      log.flush();
    },
  };
}
