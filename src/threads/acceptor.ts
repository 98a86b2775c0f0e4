// One acceptor thread (server.threads > 1): a uWS app listening on the gateway's port (the kernel spreads new
// connections over the threads' sockets with SO_REUSEPORT) running the whole request path. Per-request state
// stays on this thread; the registry, ledger, prefix index and (memory backend) quota table are the main
// thread's SharedArrayBuffers, and the Redis quota store, tokenizer pool and usage sinks are the main thread's,
// over this thread's port (remote-stages.ts).
// Its metrics reach the main thread's /metrics on the metrics BroadcastChannel, like any worker's.
// Thread: acceptor workers. Setup, reload and shutdown here; the hot path is GatewayServer's.
import { BroadcastChannel, type MessagePort } from 'node:worker_threads';
import { GatewayServer } from '../server/app.ts';
import { RequestPath } from '../pipeline/request-path.ts';
import { ResponseOwners } from '../pipeline/response-owners.ts';
import { GatewayMetrics } from '../metrics/metrics.ts';
import type { MetricsChannelMessage } from '../metrics/worker-metrics.ts';
import { RegistryMirror } from '../registry/registry-mirror.ts';
import { PrefixIndex } from '../router/prefix-index.ts';
import { EventsPrefixIndex } from '../router/events-prefix-index.ts';
import { poolPromptRefs, poolTokenizerRefs } from '../tokenize/pool-refs.ts';
import { PromptTokenizer } from '../tokenize/prompt-tokenizer.ts';
import { UpstreamClient } from '../upstream/upstream-client.ts';
import { UsageRecorder } from '../usage/usage-recorder.ts';
import { createLogger } from '../logging/logger.ts';
import { startTracing } from '../tracing/request-tracing.ts';
import { SharedQuotaStore } from '../quota/shared-quota-store.ts';
import { SharedQuotaTable } from '../quota/shared-quota-table.ts';
import { MainCaller, PortUsageSink, RemoteQuotaStore, RemoteTokenizePool } from './remote-stages.ts';
import { Outbox, unbatch, type Batch } from './outbox.ts';
import type { AcceptorWorkerData, ToAcceptor, ToMain } from './protocol.ts';
import type { GatewayConfig } from '../config/schema.ts';

export async function runAcceptor(port: MessagePort, data: AcceptorWorkerData): Promise<void> {
  let cfg: GatewayConfig = data.cfg;
  const out = new Outbox<ToMain>(port);
  const send = (msg: ToMain): void => out.postMessage(msg);
  const log = createLogger(data.logLevel).child({ acceptor: data.index });
  const metrics = new GatewayMetrics(cfg, { listenToWorkers: false, acceptor: data.index });
  const caller = new MainCaller(out);
  const registry = new RegistryMirror(data.tableBuffer, data.ledgerBuffer, data.membership, cfg.registry.down_after_failures,
    (message) => log.warn({ component: 'registry' }, message));
  const inflightCells = new Int32Array(data.inflightBuffer);
  const tokenizer = await PromptTokenizer.withRunner(cfg.tokenizer, data.remotePool ? new RemoteTokenizePool(caller) : null, {
    tokenizers: poolTokenizerRefs(cfg.pools), warm: poolPromptRefs(cfg.pools), inlineObserver: metrics.thread.tokenizeInline, trackCache: metrics.thread.trackTokenizerCache,
  });
  const upstream = new UpstreamClient(cfg.upstream);
  // Memory backend: acquire and settle run here, on the process's one table (each thread renews the leases it holds).
  const sq = data.sharedQuota;
  const shared = sq !== null ? new SharedQuotaStore(SharedQuotaTable.attach(sq.desc), sq.slots, { leaseTtlMs: cfg.quota.lease_ttl_ms }) : null;
  // Every acceptor's owner map is replicated to the others: a follow-up may arrive on another thread.
  const responses = new ResponseOwners();
  responses.share(`${data.metricsChannel}:responses`);
  // This thread's own tracer and exporter, with the resource every thread shares (src/tracing/README.md).
  const tracing = startTracing(cfg, data.env, (message) => log.warn({ component: 'tracing' }, message));
  const path = new RequestPath(cfg, {
    tracing, env: data.env, registry, prefixIndex: data.eventsBuffer !== undefined ? new EventsPrefixIndex(data.prefixBuffer, data.eventsBuffer) : new PrefixIndex(data.prefixBuffer), quota: shared ?? new RemoteQuotaStore(caller), tokenizer, upstream,
    usage: new UsageRecorder(cfg.usage.sinks.length > 0 ? [new PortUsageSink(out)] : []), responses, metrics, log,
  });
  registry.onRestart((slot) => {
    path.services.router.replicaReset(slot);
    responses.replicaRestarted(registry.replica(slot).id);
  });
  metrics.setSources({ inflight: () => server.inflightCount, admissionQueueDepth: () => path.admission.queueDepths() });

  const server = new GatewayServer(path.services, {
    // Every thread serves the same page: the main thread's, aggregated over all threads.
    metricsText: async () => await caller.call('metrics', []).done as { contentType: string; body: string },
    ready: () => path.services.cfg.pools.every((p) => registry.candidates(p.id).some((s) => registry.isHealthy(s))),
    inflightChanged: (n) => Atomics.store(inflightCells, data.index, n),
    listenPaused: () => metrics.listenPaused(),
  });

  const channel = new BroadcastChannel(data.metricsChannel);
  channel.unref();
  const workerId = `acceptor-${data.index}`;
  const publish = async (seq: number): Promise<void> => {
    const msg: MetricsChannelMessage = { type: 'snapshot', seq, workerId, metrics: await metrics.snapshot() };
    try {
      channel.postMessage(msg);
    } catch {
      // channel closed while the snapshot was built (shutting down)
    }
  };
  channel.onmessage = (ev: unknown) => {
    const msg = (ev as { data?: MetricsChannelMessage }).data;
    if (msg?.type === 'collect') void publish(msg.seq);
  };

  // Announce this thread so the main thread waits for it from its next scrape on; push every 5 s as a
  // fallback, like every worker (worker-metrics.ts).
  void publish(0);
  const pushTimer = setInterval(() => void publish(0), 5000).unref();

  port.on('message', (data: ToAcceptor | Batch<ToAcceptor>) => unbatch(data, handle));
  function handle(msg: ToAcceptor): void {
    switch (msg.t) {
      case 'ret':
        caller.answered(msg.id, msg.v, msg.err);
        break;
      case 'membership':
        registry.apply(msg.m, msg.downAfter);
        break;
      case 'restart':
        registry.restarted(msg.slot);
        break;
      case 'reload': {
        const gone = new Set(cfg.pools.flatMap((p) => p.replicas.map((r) => r.url)));
        for (const p of msg.cfg.pools) for (const r of p.replicas) gone.delete(r.url);
        cfg = msg.cfg;
        if (msg.quotaSlots !== null) shared?.setSlots(msg.quotaSlots);
        registry.apply(msg.m, cfg.registry.down_after_failures);
        for (const url of gone) void upstream.forget(url);
        metrics.reconfigure(cfg);
        const services = path.reload(cfg);
        for (const slot of msg.left) services.router.replicaReset(slot);
        server.setServices(services);
        send({ t: 'reloaded', seq: msg.seq });
        break;
      }
      case 'shutdown':
        void shutdown(msg.graceMs);
        break;
    }
  }

  async function shutdown(graceMs: number): Promise<void> {
    try {
      await server.shutdown(graceMs);
      // Settles still on their way to the quota store finish before this thread says it is done.
      const until = Date.now() + 5000;
      while (caller.outstanding > 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 5));
      await publish(0); // the last numbers, so the main thread's final page counts every request
      await upstream.close();
      await tracing?.shutdown().catch((err: unknown) => log.warn({ component: 'tracing', err }, 'trace export at shutdown failed'));
      await tokenizer.close();
      await shared?.close();
    } catch (err) {
      log.error({ err }, 'acceptor shutdown failed');
    } finally {
      clearInterval(pushTimer);
      metrics.close();
      channel.close();
      responses.close();
      server.closeConnections();
      log.flush();
      // Every usage record and settle this thread posted is ahead of this message on the port.
      send({ t: 'closed' });
      out.flush();
      port.close();
    }
  }

  try {
    const bound = await server.listen(cfg.server.host, data.port);
    send({ t: 'listening', port: bound });
  } catch (err) {
    server.closeConnections();
    send({ t: 'listen-failed', message: err instanceof Error ? err.message : String(err) });
    out.flush();
    port.close();
  }
}
