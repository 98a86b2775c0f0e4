// Every gateway metric on the main thread, defined once; GET /metrics serves `await metrics.render()`.
// Thread: main. Recording methods are on the hot path: every label child is created at setup (or once on
// first use for status/code pairs) and kept in arrays indexed by bounded label slots, so a request costs a
// few array/Map lookups plus prom-client's own per-call label hash; nothing here allocates a labels object.
// Scrape-time work (gauge sources, event-loop percentiles, merging worker snapshots) runs only in render().
// Worker threads record through WorkerMetrics (worker-metrics.ts); render() asks them over a BroadcastChannel
// and merges their snapshots with prom-client's AggregatorRegistry.aggregate into one page.
import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';
import { AggregatorRegistry, Counter, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { GatewayConfig } from '../config/schema.ts';
import { ERROR_CODES } from '../errors/codes.ts';
import * as B from './buckets.ts';
import { BoundedLabel, CappedLabel, OTHER_LABEL } from './labels.ts';
import { defineThreadMetrics, type ThreadMetrics } from './thread-metrics.ts';
import { defineScrapeGauges, type MetricSources } from './scrape-gauges.ts';
import { WorkerCollector } from './worker-collector.ts';
import type { MetricsSnapshot } from './worker-metrics.ts';

export type RouteName = 'chat' | 'completions';
export type AdmissionResult = 'admitted' | 'queued' | 'shed';
export type QuotaResult = 'ok' | 'rate_limit_exceeded' | 'concurrency_limit_exceeded' | 'quota_unavailable' | 'degraded';
export type UpstreamErrorKind = 'connect' | 'reset' | 'status_5xx' | 'status_4xx' | 'first_token_timeout' | 'mid_stream';
export type CancelPhase = 'queued' | 'upstream_wait' | 'streaming';

/** Everything known about a request when it completes; recorded once by requestEnded. */
export interface RequestOutcome {
  route: RouteName;
  pool: string | null;
  tenant: string | null;
  status: number;
  /** Error code on the wire, or null for success. */
  code: string | null;
  stream: boolean;
  ttftSeconds: number | null;
  durationSeconds: number;
  /** Time spent waiting on the replica (connect to last byte), summed over attempts. */
  upstreamSeconds: number;
  queueSeconds: number;
  inputTokens: number;
  outputTokens: number;
  cachedTokens: number;
  predictedCachedTokens: number | null;
  retries: number;
  cancelled: boolean;
  tpotSeconds: number | null;
}

export type { MetricSources } from './scrape-gauges.ts';
export type { MetricsSnapshot } from './worker-metrics.ts';

export interface GatewayMetricsOptions {
  /** Longest render() waits for worker snapshots before using the last ones it has. Default 50 ms. */
  workerCollectTimeoutMs?: number;
  /** Listen for worker snapshots on the metrics BroadcastChannel. Default true. */
  listenToWorkers?: boolean;
}

interface Observer { observe(value: number): void }
interface Incrementer { inc(value?: number): void }

const ROUTES: readonly RouteName[] = ['chat', 'completions'];
const TIERS = ['premium', 'standard', 'batch'] as const;
const ADMISSION_RESULTS: readonly AdmissionResult[] = ['admitted', 'queued', 'shed'];
const QUOTA_RESULTS: readonly QuotaResult[] = ['ok', 'rate_limit_exceeded', 'concurrency_limit_exceeded', 'quota_unavailable', 'degraded'];
const UPSTREAM_ERROR_KINDS: readonly UpstreamErrorKind[] = ['connect', 'reset', 'status_5xx', 'status_4xx', 'first_token_timeout', 'mid_stream'];
const CANCEL_PHASES: readonly CancelPhase[] = ['queued', 'upstream_wait', 'streaming'];
/** prom-client gauges named *_total, which promtool rejects; their per-type twins without _total remain. */
const DROPPED_DEFAULT_METRICS = new Set([
  'gateway_nodejs_active_handles_total', 'gateway_nodejs_active_requests_total', 'gateway_nodejs_active_resources_total',
]);
/** Routing policy names are free strings from plugins; more than this many distinct ones is a bug. */
const MAX_POLICY_LABELS = 16;

/** Children for one (route, pool) pair. */
interface RouteSlot {
  readonly requests: Map<number, Map<string, Incrementer>>;
  readonly ttftByTier: Observer[];
  readonly duration: Observer;
  readonly cancellations: Incrementer;
}

/** Children for one pool. */
interface PoolSlot {
  readonly tpot: Observer;
  readonly queueWait: Observer;
  readonly predictedCached: Incrementer;
  readonly reportedCached: Incrementer;
  /** [tenantSlot] → input, output, cached token counters. */
  readonly tokens: { input: Incrementer; output: Incrementer; cached: Incrementer }[];
  readonly admission: Record<AdmissionResult, Incrementer>;
  readonly retries: Map<string, Incrementer>;
}

export class GatewayMetrics {
  readonly contentType: string;
  /** Shared with workers' definitions; the tokenizer pool client records inline tokenization here. */
  readonly thread: ThreadMetrics;
  private readonly register = new Registry();
  /** prom-client's default process metrics, kept apart so render() can drop the ones promtool rejects. */
  private readonly defaultsRegister = new Registry();
  private sources: MetricSources = {};

  private readonly pools: BoundedLabel;
  private readonly replicas: BoundedLabel;
  private readonly tenants: BoundedLabel;
  private readonly codes: BoundedLabel;
  private readonly policies = new CappedLabel(MAX_POLICY_LABELS);
  /** tenant name → index into TIERS (+ TIERS.length for unknown). */
  private readonly tierOfTenant = new Map<string, number>();

  private readonly requestsTotal: Counter<'route' | 'pool' | 'status' | 'code'>;
  private readonly routeSlots: RouteSlot[] = [];
  private readonly poolSlots: PoolSlot[] = [];
  private readonly overheadByRoute: Observer[] = [];
  private readonly quotaChildren: Record<QuotaResult, Incrementer>;
  private readonly upstreamErrorChildren: Record<UpstreamErrorKind, Incrementer>;
  private readonly cancelLatency: Record<CancelPhase, Observer>;
  private readonly routingDecisions: Counter<'policy' | 'replica'>;
  private readonly routedChildren = new Map<string, Incrementer[]>();
  private readonly retriesTotal: Counter<'pool' | 'kind'>;

  private readonly loopDelay: IntervalHistogram;
  private readonly workers: WorkerCollector;

  constructor(cfg: GatewayConfig, opts: GatewayMetricsOptions = {}) {
    const reg = this.register;
    this.contentType = reg.contentType;
    this.pools = new BoundedLabel(cfg.pools.map((p) => p.id));
    this.replicas = new BoundedLabel(cfg.pools.flatMap((p) => p.replicas.map((r) => r.id)));
    this.tenants = new BoundedLabel(cfg.metrics.tenant_labels);
    this.codes = new BoundedLabel([...Object.keys(ERROR_CODES), 'upstream_bad_request']);
    for (const t of cfg.tenants) this.tierOfTenant.set(t.name, TIERS.indexOf(t.sla_tier));
    this.thread = defineThreadMetrics(reg);
    const poolLabels = this.pools.values;
    const tenantLabels = this.tenants.values;
    const tierLabels = [...TIERS, 'none'];

    this.requestsTotal = new Counter({
      name: 'gateway_requests_total',
      help: 'Completion requests finished, by route, pool, HTTP status and error code ("none" on success).',
      labelNames: ['route', 'pool', 'status', 'code'] as const,
      registers: [reg],
    });
    const ttft = histogram(reg, 'gateway_ttft_seconds', 'Time from request received to first token sent to the client.', ['route', 'pool', 'tier'], B.TTFT_BUCKETS_SECONDS);
    const tpot = histogram(reg, 'gateway_tpot_seconds', 'Mean time per output token after the first, per request.', ['pool'], B.TPOT_BUCKETS_SECONDS);
    const duration = histogram(reg, 'gateway_request_duration_seconds', 'End-to-end request duration, received to last byte.', ['route', 'pool'], B.DURATION_BUCKETS_SECONDS);
    const overhead = histogram(reg, 'gateway_overhead_seconds', "The gateway's own time per request: duration minus time waiting on replicas and in the admission queue.", ['route'], B.OVERHEAD_BUCKETS_SECONDS);
    const queueWait = histogram(reg, 'gateway_queue_wait_seconds', 'Time spent in the admission queue, for requests that reached admission.', ['pool'], B.QUEUE_WAIT_BUCKETS_SECONDS);
    const cancelLatency = histogram(reg, 'gateway_cancellation_latency_seconds', 'Client disconnect to upstream work aborted, by the phase the request was in.', ['phase'], B.CANCEL_LATENCY_BUCKETS_SECONDS);
    const tokens = counter(reg, 'gateway_tokens_total', 'Tokens by pool, tenant (configured tenants, else "other") and kind (input, output, cached).', ['pool', 'tenant', 'kind']);
    const predicted = counter(reg, 'gateway_prefix_cache_predicted_tokens_total', 'Prompt tokens the router predicted would hit the replica prefix cache.', ['pool']);
    const reported = counter(reg, 'gateway_prefix_cache_reported_tokens_total', 'Cached prompt tokens the replica reported, for the requests counted in the predicted total.', ['pool']);
    const cancellations = counter(reg, 'gateway_client_cancellations_total', 'Requests the client abandoned before completion.', ['route', 'pool']);
    const admission = counter(reg, 'gateway_admission_decisions_total', 'Admission decisions by pool and result (admitted, queued, shed).', ['pool', 'result']);
    const quota = counter(reg, 'gateway_quota_decisions_total', 'Quota decisions by result.', ['result']);
    const upstreamErrors = counter(reg, 'gateway_upstream_errors_total', 'Upstream failures by kind.', ['kind']);
    this.routingDecisions = counter(reg, 'gateway_routing_decisions_total', 'Routing decisions by policy and chosen replica.', ['policy', 'replica']);
    this.retriesTotal = counter(reg, 'gateway_retries_total', 'Upstream attempts retried (before the first token), by pool and failure kind.', ['pool', 'kind']);

    for (const route of ROUTES) {
      this.overheadByRoute.push(overhead.labels(route));
      for (const pool of poolLabels) {
        this.routeSlots.push({
          requests: new Map(),
          ttftByTier: tierLabels.map((tier) => ttft.labels(route, pool, tier)),
          duration: duration.labels(route, pool),
          cancellations: cancellations.labels(route, pool),
        });
      }
    }
    for (const pool of poolLabels) {
      this.poolSlots.push({
        tpot: tpot.labels(pool),
        queueWait: queueWait.labels(pool),
        predictedCached: predicted.labels(pool),
        reportedCached: reported.labels(pool),
        tokens: tenantLabels.map((tenant) => ({
          input: tokens.labels(pool, tenant, 'input'),
          output: tokens.labels(pool, tenant, 'output'),
          cached: tokens.labels(pool, tenant, 'cached'),
        })),
        admission: recordOf(ADMISSION_RESULTS, (r) => admission.labels(pool, r)),
        retries: new Map(),
      });
    }
    this.quotaChildren = recordOf(QUOTA_RESULTS, (r) => quota.labels(r));
    this.upstreamErrorChildren = recordOf(UPSTREAM_ERROR_KINDS, (k) => upstreamErrors.labels(k));
    // Zero series for the outcomes dashboards divide by, so ratios and rate() work before the first event
    // (prom-client only materialises a child on its first inc). Histograms stay lazy: ~20 series each.
    for (let r = 0; r < ROUTES.length; r++) {
      for (const pool of cfg.pools) this.requestChild(r, this.pools.index(pool.id), 200, null).inc(0);
    }
    for (const pool of cfg.pools) for (const r of ADMISSION_RESULTS) this.poolSlots[this.pools.index(pool.id)]!.admission[r].inc(0);
    for (const r of QUOTA_RESULTS) this.quotaChildren[r].inc(0);
    for (const k of UPSTREAM_ERROR_KINDS) this.upstreamErrorChildren[k].inc(0);
    this.cancelLatency = recordOf(CANCEL_PHASES, (p) => cancelLatency.labels(p));
    for (const r of cfg.pools.flatMap((p) => p.replicas)) this.routedChild(cfg.routing.policy, r.id);

    // 10 ms resolution: the sampling timer itself costs ~100 wakeups/s; finer would only add noise.
    this.loopDelay = monitorEventLoopDelay({ resolution: 10 });
    this.loopDelay.enable();
    defineScrapeGauges({ registry: reg, sources: () => this.sources, replicas: this.replicas, pools: this.pools, loopDelay: this.loopDelay });
    collectDefaultMetrics({ register: this.defaultsRegister, prefix: 'gateway_' });
    this.workers = new WorkerCollector(opts.listenToWorkers !== false, opts.workerCollectTimeoutMs ?? 50);
  }

  requestEnded(o: RequestOutcome): void {
    const routeIndex = o.route === 'chat' ? 0 : 1;
    const poolIndex = this.pools.index(o.pool);
    const rs = this.routeSlots[routeIndex * this.pools.values.length + poolIndex]!;
    const ps = this.poolSlots[poolIndex]!;
    this.requestChild(routeIndex, poolIndex, o.status, o.code).inc();
    rs.duration.observe(o.durationSeconds);
    if (o.ttftSeconds !== null) rs.ttftByTier[this.tierIndex(o.tenant)]!.observe(o.ttftSeconds);
    if (o.tpotSeconds !== null) ps.tpot.observe(o.tpotSeconds);
    // Queue time is waiting for GPU capacity, like upstream time: the design's 10 ms budget excludes both.
    const overheadSeconds = o.durationSeconds - o.upstreamSeconds - o.queueSeconds;
    this.overheadByRoute[routeIndex]!.observe(overheadSeconds > 0 ? overheadSeconds : 0);
    if (o.queueSeconds > 0 || o.upstreamSeconds > 0) ps.queueWait.observe(o.queueSeconds);
    const t = ps.tokens[this.tenants.index(o.tenant)]!;
    if (o.inputTokens > 0) t.input.inc(o.inputTokens);
    if (o.outputTokens > 0) t.output.inc(o.outputTokens);
    if (o.cachedTokens > 0) t.cached.inc(o.cachedTokens);
    if (o.predictedCachedTokens !== null) {
      ps.predictedCached.inc(o.predictedCachedTokens);
      ps.reportedCached.inc(o.cachedTokens);
    }
    if (o.cancelled) rs.cancellations.inc();
  }

  admission(pool: string, result: AdmissionResult): void {
    this.poolSlots[this.pools.index(pool)]!.admission[result].inc();
  }

  quota(result: QuotaResult): void {
    this.quotaChildren[result].inc();
  }

  routed(policy: string, replica: string): void {
    this.routedChild(policy, replica).inc();
  }

  retry(pool: string, kind: string): void {
    const slot = this.poolSlots[this.pools.index(pool)]!;
    let child = slot.retries.get(kind);
    if (child === undefined) {
      const label = (UPSTREAM_ERROR_KINDS as readonly string[]).includes(kind) ? kind : OTHER_LABEL;
      child = this.retriesTotal.labels(this.pools.label(pool), label);
      if (slot.retries.size < 64) slot.retries.set(kind, child); // a flood of odd kinds must not grow the map
    }
    child.inc();
  }

  upstreamError(kind: UpstreamErrorKind): void {
    this.upstreamErrorChildren[kind].inc();
  }

  cancelled(phase: CancelPhase, latencySeconds: number): void {
    this.cancelLatency[phase].observe(latencySeconds);
  }

  /** Replaces the given scrape-time sources; omitted keys keep their current source. */
  setSources(sources: MetricSources): void {
    this.sources = { ...this.sources, ...sources };
  }

  /** Merges one worker's registry JSON (WorkerMetrics.snapshot()); the latest snapshot per id wins. */
  absorbWorker(workerId: string, metrics: MetricsSnapshot): void {
    this.workers.absorb(workerId, metrics);
  }

  /**
   * The whole exposition page: this thread's registry, the default process metrics, and every worker's
   * latest snapshot, merged by AggregatorRegistry.aggregate (counters and histograms sum across threads).
   * Costs ~1-2 ms of main-thread CPU per scrape; nothing here runs per request.
   */
  async render(): Promise<string> {
    await this.workers.collect();
    const [own, defaults] = await Promise.all([this.register.getMetricsAsJSON(), this.defaultsRegister.getMetricsAsJSON()]);
    this.loopDelay.reset(); // the event-loop gauges cover one scrape interval
    const main = own.concat(defaults.filter((m) => !DROPPED_DEFAULT_METRICS.has(m.name)));
    // process_start_time uses the 'omit' aggregator (meant for cluster mode); only this thread reports it.
    for (const m of main) if (m.aggregator === 'omit') m.aggregator = 'first';
    return AggregatorRegistry.aggregate([main, ...this.workers.snapshots.values()]).metrics();
  }

  /** Stops the event-loop monitor and the worker channel (tests and shutdown). */
  close(): void {
    this.loopDelay.disable();
    this.workers.close();
  }

  private requestChild(routeIndex: number, poolIndex: number, status: number, code: string | null): Incrementer {
    const byStatus = this.routeSlots[routeIndex * this.pools.values.length + poolIndex]!.requests;
    let byCode = byStatus.get(status);
    if (byCode === undefined) {
      byCode = new Map();
      byStatus.set(status, byCode);
    }
    let child = byCode.get(code ?? '');
    if (child === undefined) {
      const statusLabel = Number.isInteger(status) && status >= 100 && status <= 599 ? String(status) : '0';
      child = this.requestsTotal.labels(ROUTES[routeIndex]!, this.pools.values[poolIndex]!, statusLabel, this.codes.label(code));
      if (byCode.size < 64) byCode.set(code ?? '', child);
    }
    return child;
  }

  private routedChild(policy: string, replica: string): Incrementer {
    let byReplica = this.routedChildren.get(policy);
    if (byReplica === undefined) {
      byReplica = [];
      if (this.routedChildren.size < MAX_POLICY_LABELS * 2) this.routedChildren.set(policy, byReplica);
    }
    const i = this.replicas.index(replica);
    let child = byReplica[i];
    if (child === undefined) {
      child = this.routingDecisions.labels(this.policies.label(policy), this.replicas.values[i]!);
      byReplica[i] = child;
    }
    return child;
  }

  private tierIndex(tenant: string | null): number {
    return (tenant === null ? undefined : this.tierOfTenant.get(tenant)) ?? TIERS.length;
  }
}

function histogram<L extends string>(reg: Registry, name: string, help: string, labelNames: readonly L[], buckets: readonly number[]): Histogram<L> {
  return new Histogram({ name, help, labelNames, buckets: [...buckets], registers: [reg] });
}

function counter<L extends string>(reg: Registry, name: string, help: string, labelNames: readonly L[]): Counter<L> {
  return new Counter({ name, help, labelNames, registers: [reg] });
}

function recordOf<K extends string, V>(keys: readonly K[], make: (k: K) => V): Record<K, V> {
  const out = {} as Record<K, V>;
  for (const k of keys) out[k] = make(k);
  return out;
}
