// The per-thread part of a gateway: router, admission controller and the Services the request pipeline reads,
// built from a config over stages made elsewhere (the registry or its mirror, the prefix index, quota,
// tokenizer, upstream client, usage, metrics). The single-thread gateway (gateway.ts) and every acceptor thread
// (src/threads/acceptor.ts) compose the request path through here, so both run the same wiring.
// Thread: whichever runs the acceptor. Setup and reload only.
import type { GatewayConfig } from '../config/schema.ts';
import { AdmissionController } from '../admission/admission-controller.ts';
import { GpuTimeModel } from '../gpu-time/gpu-time-model.ts';
import { gpuFigureSources } from '../gpu-time/figure-sources.ts';
import { ReplyLengths, replyErrorSources } from '../gpu-time/reply-length/reply-lengths.ts';
import { KvEstimator } from '../router/kv-estimate.ts';
import { WallClock } from '../util/clock.ts';
import { Authenticator } from '../auth/authenticate.ts';
import type { QuotaStore } from '../quota/types.ts';
import { APPROXIMATE_ONLY, INDEX_POLICIES, Router, createPolicy } from '../router/route.ts';
import { EventsPrefixIndex } from '../router/events-prefix-index.ts';
import type { FleetView, RoutingFeedback, RoutingPolicy } from '../router/types.ts';
import type { PrefixIndex } from '../router/prefix-index.ts';
import type { UpstreamClient } from '../upstream/upstream-client.ts';
import type { UsageRecorder } from '../usage/usage-recorder.ts';
import type { GatewayMetrics } from '../metrics/metrics.ts';
import { ModelCatalog } from './model-catalog.ts';
import type { ResponseOwners } from './response-owners.ts';
import { StallWatch, type StallSignals } from './stall-watch.ts';
import type { LogStage, RegistryStage, Services, TokenizeStage } from './services.ts';
import type { RequestTracing } from '../tracing/request-tracing.ts';

export type PolicyFactory = (cfg: GatewayConfig, fleet: FleetView, index: PrefixIndex, gpu?: GpuTimeModel) => RoutingPolicy & RoutingFeedback;

export interface RequestPathParts {
  env: Record<string, string | undefined>;
  registry: FleetView & RegistryStage & StallSignals;
  prefixIndex: PrefixIndex;
  quota: QuotaStore;
  tokenizer: TokenizeStage;
  upstream: UpstreamClient;
  usage: UsageRecorder;
  /** The thread's Responses API owner map, kept across reloads. */
  responses: ResponseOwners;
  metrics: GatewayMetrics;
  log: LogStage;
  routingPolicy?: PolicyFactory | undefined;
  /** This thread's tracing (null: off); kept across reloads. */
  tracing?: RequestTracing | null;
}

export class RequestPath {
  /** Kept for the path's life: requests waiting in its queues hold callbacks into it. */
  readonly admission: AdmissionController;
  /** Kept across reloads too: it holds the attempts in flight and which replicas are held as stalled. */
  readonly stalls: StallWatch;
  /** The GPU-time model admission and kv-aware share; kept across reloads (what it learned stays true). */
  readonly gpu: GpuTimeModel;
  /** Reply lengths learned from finished streams; kept across reloads like the GPU-time model. */
  readonly replyLengths: ReplyLengths;
  private current: Services;
  private readonly parts: RequestPathParts;
  /** upstream.connections_per_replica is the client's, fixed at start. */
  private readonly connectionsPerReplica: number;

  constructor(cfg: GatewayConfig, parts: RequestPathParts) {
    this.parts = parts;
    this.connectionsPerReplica = cfg.upstream.connections_per_replica;
    const reg = parts.registry;
    this.stalls = new StallWatch(reg, reg.ledger.slots, cfg.upstream.stall_timeout_ms, (slot, attempts) => {
      const info = reg.replica(slot);
      parts.log.warn({ replica: info.id, attempts, stall_timeout_ms: this.stalls.window }, 'replica made no progress: its waiting attempts are retried elsewhere and it is held out of routing until it moves');
    });
    this.gpu = new GpuTimeModel(cfg.pools, reg, cfg.admission.stale_ms);
    this.gpu.metrics = parts.metrics;
    parts.metrics.setSources(gpuFigureSources(this.gpu, reg, () => this.current.cfg.pools));
    this.replyLengths = new ReplyLengths(cfg.pools);
    parts.metrics.setSources(replyErrorSources(this.replyLengths));
    const router = this.newRouter(cfg);
    this.admission = new AdmissionController({
      fleet: parts.registry, kv: new KvEstimator(parts.registry, parts.registry.ledger.slots, cfg.admission.stale_ms), gpu: this.gpu, router,
      clock: WallClock, cfg: cfg.admission, connectionsPerReplica: this.connectionsPerReplica,
      pollMs: cfg.registry.scrape_interval_ms, metrics: parts.metrics,
      onCallbackError: (err) => parts.log.error({ err }, 'admission callback failed'),
    });
    this.current = this.build(cfg, router);
  }

  get services(): Services {
    return this.current;
  }

  /** New services for `next`; requests in flight keep the ones they started with. */
  reload(next: GatewayConfig): Services {
    this.gpu.reconfigure(next.pools);
    this.replyLengths.reconfigure(next.pools);
    this.current = this.build(next, this.newRouter(next));
    return this.current;
  }

  private newRouter(c: GatewayConfig): Router {
    const p = this.parts;
    const index = !INDEX_POLICIES.has(c.routing.policy) ? null : p.prefixIndex instanceof EventsPrefixIndex ? p.prefixIndex : APPROXIMATE_ONLY;
    return new Router((p.routingPolicy ?? createPolicy)(c, p.registry, p.prefixIndex, this.gpu), p.registry, this.stalls, index, this.gpu);
  }

  private build(c: GatewayConfig, router: Router): Services {
    const p = this.parts;
    this.stalls.reconfigure(c.upstream.stall_timeout_ms);
    this.admission.reconfigure({ cfg: c.admission, router, connectionsPerReplica: this.connectionsPerReplica, pollMs: c.registry.scrape_interval_ms });
    return Object.freeze({
      cfg: c, catalog: new ModelCatalog(c), auth: new Authenticator(c.tenants, p.env), quota: p.quota, tokenizer: p.tokenizer,
      registry: p.registry, router, admission: this.admission, stalls: this.stalls, upstream: p.upstream, usage: p.usage, responses: p.responses,
      replyLengths: this.replyLengths, metrics: p.metrics, log: p.log, tracing: p.tracing ?? null,
    });
  }
}
