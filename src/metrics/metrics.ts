// The gateway's metrics API: the recording methods the pipeline calls and GET /metrics' `await render()`.
// Families (names, labels, buckets) are defined once in families.ts and thread-metrics.ts; binding.ts maps
// config onto bounded label values. Thread: main. Recording methods are on the hot path: every label child
// is created at setup (or once on first use for status/code pairs) and kept in arrays indexed by label slot,
// so a request costs a few array/Map lookups and, per series, one property lookup and an add (fast-children.ts).
// Scrape-time work (gauge sources, event-loop percentiles, merging worker snapshots) runs only in render().
// Worker threads record through WorkerMetrics (worker-metrics.ts); render() asks them over a BroadcastChannel
// and merges their snapshots with prom-client's AggregatorRegistry.aggregate into one page.
import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';
import { AggregatorRegistry, Counter, Registry, collectDefaultMetrics } from 'prom-client';
import type { GatewayConfig } from '../config/schema.ts';
import { Binding, CANCEL_PHASES, QUOTA_RESULTS, ROUTES, UPSTREAM_ERROR_KINDS } from './binding.ts';
import { counterChild, histogramChild, type Incrementer, type Observer } from './fast-children.ts';
import { defineFamilies, type Families } from './families.ts';
import { defineScrapeGauges, type MetricSources } from './scrape-gauges.ts';
import { defineThreadMetrics, type ThreadMetrics } from './thread-metrics.ts';
import { WorkerCollector } from './worker-collector.ts';
import { METRICS_CHANNEL_NAME, type MetricsSnapshot } from './worker-metrics.ts';

export type RouteName = 'chat' | 'completions' | 'responses';
export type AdmissionResult = 'admitted' | 'queued' | 'shed';
export type QuotaResult = (typeof QUOTA_RESULTS)[number];
export type UpstreamErrorKind = (typeof UPSTREAM_ERROR_KINDS)[number];
export type CancelPhase = (typeof CANCEL_PHASES)[number];
export type { MetricSources } from './scrape-gauges.ts';

/** Label values of gateway_routing_why_total: routing.policy's names and the router's `why` values. */
const POLICY_NAMES: ReadonlySet<string> = new Set(['kv-aware', 'round-robin', 'least-outstanding-tokens', 'llm-d', 'llm-d-precise', 'sglang', 'dynamo']);
const TEMPLATE_FALLBACK_REASONS: ReadonlySet<string> = new Set(['unsupported', 'python_error', 'render_error', 'media_estimate']);
const ROUTE_WHYS: ReadonlySet<string> = new Set(['prefix', 'cold', 'load-bound', 'headroom', 'adapter', 'policy']);
export type { MetricsSnapshot } from './worker-metrics.ts';

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
  /** Cached tokens the router predicted on the replica that answered; null when no replica answered. */
  predictedCachedTokens?: number | null;
  /** The replica that answered (its id), for the per-replica prediction error; null or absent: none. */
  replica?: string | null;
  retries: number;
  cancelled: boolean;
  tpotSeconds: number | null;
}

export interface GatewayMetricsOptions {
  /** Longest render() waits for worker snapshots before using the last ones it has. Default 50 ms. */
  workerCollectTimeoutMs?: number;
  /** Listen for worker snapshots on the metrics BroadcastChannel. Default true. */
  listenToWorkers?: boolean;
  /**
   * BroadcastChannel name shared with this gateway's workers. The default suits one gateway per process;
   * tests that run several gateways in one process give each its own name so their workers do not mix.
   */
  workerChannel?: string;
  /** Scrapes without a word from a worker before its numbers are folded into a retired sum. Default 20. */
  retireWorkerAfterMissed?: number;
  /** Set on an acceptor thread (server.threads > 1): its index labels gateway_acceptor_requests_total. */
  acceptor?: number;
}

/** Per-thread gauges that must not be summed across acceptor threads; snapshot() leaves them out. */
const THREAD_LOCAL_GAUGE = /^gateway_event_loop_delay_/;

/** prom-client gauges named *_total, which promtool rejects; removed at setup. Per-type twins without _total remain. */
const DROPPED_DEFAULT_METRICS = new Set([
  'gateway_nodejs_active_handles_total', 'gateway_nodejs_active_requests_total', 'gateway_nodejs_active_resources_total',
]);

export class GatewayMetrics {
  readonly contentType: string;
  /** Pass to workers (workerData) as WorkerMetricsOptions.channelName. */
  readonly workerChannel: string;
  /** Shared with workers' definitions; the tokenizer pool client records inline tokenization here. */
  readonly thread: ThreadMetrics;
  private readonly register = new Registry();
  /** prom-client's default process metrics, kept apart so render() can drop the ones promtool rejects. */
  private readonly defaultsRegister = new Registry();
  private readonly f: Families;
  /** Config-dependent label slots and children; replaced whole by reconfigure(). */
  private b: Binding;
  private sources: MetricSources = {};
  private readonly whyChildren = new Map<string, Incrementer>();
  private readonly cacheErrorByPool = new Map<string, Observer>();
  /** Pool label → children of gateway_prefix_prediction_error_tokens by the binding's replica index (renewed with it). */
  private cacheErrorByReplica = new Map<string, Observer[]>();
  private readonly ttftErrorByPool = new Map<string, Observer>();
  private readonly shedChildren = new Map<string, Incrementer>();
  private readonly infeasibleChildren = new Map<string, Incrementer>();
  private readonly overheadByRoute: readonly Observer[];
  private readonly quotaChildren: Readonly<Record<QuotaResult, Incrementer>>;
  private readonly upstreamErrorChildren: Readonly<Record<UpstreamErrorKind, Incrementer>>;
  private readonly cancelLatency: Readonly<Record<CancelPhase, Observer>>;
  private readonly loopDelay: IntervalHistogram;
  private readonly workers: WorkerCollector;
  private readonly acceptorRequests: Incrementer | null;

  constructor(cfg: GatewayConfig, opts: GatewayMetricsOptions = {}) {
    const reg = this.register;
    this.contentType = reg.contentType;
    this.f = defineFamilies(reg);
    this.thread = defineThreadMetrics(reg);
    this.b = new Binding(cfg, this.f);
    const f = this.f;
    this.overheadByRoute = ROUTES.map((r) => histogramChild(f.overhead, r));
    this.quotaChildren = recordOf(QUOTA_RESULTS, (r) => counterChild(f.quota, r));
    this.upstreamErrorChildren = recordOf(UPSTREAM_ERROR_KINDS, (k) => counterChild(f.upstreamErrors, k));
    this.cancelLatency = recordOf(CANCEL_PHASES, (p) => histogramChild(f.cancelLatency, p));
    for (const r of QUOTA_RESULTS) this.quotaChildren[r].inc(0); // zero series, see Binding
    for (const k of UPSTREAM_ERROR_KINDS) this.upstreamErrorChildren[k].inc(0);
    f.configReloads.labels('applied').inc(0);
    f.configReloads.labels('rejected').inc(0);

    // 10 ms resolution: the sampling timer itself costs ~100 wakeups/s; finer would only add noise.
    this.loopDelay = monitorEventLoopDelay({ resolution: 10 });
    this.loopDelay.enable();
    defineScrapeGauges({
      registry: reg, sources: () => this.sources, replicas: () => this.b.replicas, pools: () => this.b.pools, loopDelay: this.loopDelay,
    });
    collectDefaultMetrics({ register: this.defaultsRegister, prefix: 'gateway_' });
    for (const name of DROPPED_DEFAULT_METRICS) this.defaultsRegister.removeSingleMetric(name);
    this.acceptorRequests = opts.acceptor === undefined ? null : counterChild(new Counter({
      name: 'gateway_acceptor_requests_total', help: 'Completion requests taken by each acceptor thread (server.threads above 1).',
      labelNames: ['acceptor'] as const, registers: [reg],
    }), String(opts.acceptor));
    this.workerChannel = opts.workerChannel ?? METRICS_CHANNEL_NAME;
    this.workers = new WorkerCollector({
      listen: opts.listenToWorkers !== false, timeoutMs: opts.workerCollectTimeoutMs ?? 50,
      channelName: this.workerChannel, ...(opts.retireWorkerAfterMissed ? { retireAfterMissed: opts.retireWorkerAfterMissed } : {}),
    });
  }

  /** Re-reads pools, replicas, tenants and tenant_labels after a config reload. Existing series keep counting. */
  reconfigure(cfg: GatewayConfig): void {
    this.b = new Binding(cfg, this.f);
    this.cacheErrorByReplica = new Map();
  }

  requestEnded(o: RequestOutcome): void {
    const b = this.b;
    const routeIndex = ROUTES.indexOf(o.route);
    const poolIndex = b.pools.index(o.pool);
    const rs = b.routeSlot(routeIndex, poolIndex);
    const ps = b.poolSlots[poolIndex]!;
    b.requestChild(routeIndex, poolIndex, o.status, o.code).inc();
    this.acceptorRequests?.inc();
    rs.duration.observe(o.durationSeconds);
    if (o.ttftSeconds !== null) b.ttft(rs, o.tenant, o.inputTokens).observe(o.ttftSeconds);
    if (o.tpotSeconds !== null) ps.tpot.observe(o.tpotSeconds);
    // Queue time is waiting for GPU capacity, like upstream time: the design's 10 ms budget excludes both.
    const overheadSeconds = o.durationSeconds - o.upstreamSeconds - o.queueSeconds;
    this.overheadByRoute[routeIndex]!.observe(overheadSeconds > 0 ? overheadSeconds : 0);
    if (o.queueSeconds > 0 || o.upstreamSeconds > 0) ps.queueWait.observe(o.queueSeconds);
    const t = ps.tokens[b.tenants.index(o.tenant)]!;
    if (o.inputTokens > 0) t.input.inc(o.inputTokens);
    if (o.outputTokens > 0) t.output.inc(o.outputTokens);
    if (o.cachedTokens > 0) t.cached.inc(o.cachedTokens);
    if (o.cancelled) rs.cancellations.inc();
    if (o.predictedCachedTokens !== undefined && o.predictedCachedTokens !== null) {
      const pool = b.pools.values[poolIndex]!;
      let h = this.cacheErrorByPool.get(pool);
      if (h === undefined) this.cacheErrorByPool.set(pool, h = histogramChild(this.f.cacheError, pool));
      h.observe(o.predictedCachedTokens - o.cachedTokens);
      if (o.replica !== undefined && o.replica !== null) {
        const ri = b.replicas.index(o.replica);
        let byReplica = this.cacheErrorByReplica.get(pool);
        if (byReplica === undefined) this.cacheErrorByReplica.set(pool, byReplica = []);
        const r = byReplica[ri] ??= histogramChild(this.f.prefixPredictionError, pool, b.replicas.values[ri]!);
        r.observe(o.predictedCachedTokens - o.cachedTokens);
      }
    }
  }

  admission(pool: string, result: AdmissionResult): void {
    const b = this.b;
    b.poolSlots[b.pools.index(pool)]!.admission[result].inc();
  }

  /** A shed (429 server_overloaded), decided at arrival or after queueing. */
  shed(pool: string, when: 'arrival' | 'queued'): void {
    const b = this.b;
    const label = b.pools.values[b.pools.index(pool)]!;
    const key = `${label}\u0000${when}`;
    let c = this.shedChildren.get(key);
    if (c === undefined) this.shedChildren.set(key, c = counterChild(this.f.sheds, label, when));
    c.inc();
  }

  /** A request whose targets are out of reach even on an idle replica (src/admission/reach.ts). */
  infeasible(pool: string, tier: string, reason: string): void {
    const b = this.b;
    const label = b.pools.values[b.pools.index(pool)]!;
    const key = `${label}\u0000${tier}\u0000${reason}`;
    let c = this.infeasibleChildren.get(key);
    if (c === undefined) this.infeasibleChildren.set(key, c = counterChild(this.f.infeasible, label, tier, reason));
    c.inc();
  }

  /** The GPU-time model's TTFT prediction against what the first token showed (both ms, from dispatch). */
  ttftPrediction(pool: string, predictedMs: number, observedMs: number): void {
    if (!(observedMs > 0)) return;
    const b = this.b;
    const label = b.pools.values[b.pools.index(pool)]!;
    let h = this.ttftErrorByPool.get(label);
    if (h === undefined) this.ttftErrorByPool.set(label, h = histogramChild(this.f.ttftPredictionError, label));
    h.observe((predictedMs - observedMs) / observedMs);
  }

  quota(result: QuotaResult): void {
    this.quotaChildren[result].inc();
  }

  routed(policy: string, replica: string, why?: string): void {
    this.b.routedChild(policy, replica).inc();
    if (why === undefined) return;
    const key = `${policy}\u0000${why}`;
    let c = this.whyChildren.get(key);
    if (c === undefined) {
      c = counterChild(this.f.routingWhy, POLICY_NAMES.has(policy) ? policy : 'other', ROUTE_WHYS.has(why) ? why : 'other');
      if (this.whyChildren.size < 64) this.whyChildren.set(key, c);
    }
    c.inc();
  }

  retry(pool: string, kind: string): void {
    this.b.retryChild(pool, kind).inc();
  }

  /** A chat prompt counted on an estimate (src/tokenize/jinja-template.ts); rare, so a label lookup is fine. */
  templateFallback(pool: string, reason: string): void {
    const label = TEMPLATE_FALLBACK_REASONS.has(reason) ? reason : 'other';
    this.f.templateFallback.labels(this.b.pools.values[this.b.pools.index(pool)]!, label).inc();
  }

  upstreamError(kind: UpstreamErrorKind): void {
    this.upstreamErrorChildren[kind].inc();
  }

  /** Not on the request path: one label lookup per reload is fine. */
  configReload(result: 'applied' | 'rejected'): void {
    this.f.configReloads.labels(result).inc();
  }

  /** A listen socket closed at the open-file limit (src/server/listen-guard.ts); rare, not on the request path. */
  listenPaused(): void {
    this.f.listenPauses.inc();
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
   * Runs only per scrape, never per request.
   */
  async render(): Promise<string> {
    await this.workers.collect();
    try {
      const workers = this.workers.all();
      if (workers.length === 0) {
        // Fast path (no worker threads report): the two registries hold disjoint names; ~0.5 ms cheaper.
        const [own, defaults] = await Promise.all([this.register.metrics(), this.defaultsRegister.metrics()]);
        return `${own}${defaults}`;
      }
      const [own, defaults] = await Promise.all([this.register.getMetricsAsJSON(), this.defaultsRegister.getMetricsAsJSON()]);
      const main = own.concat(defaults);
      // process_start_time uses the 'omit' aggregator (meant for cluster mode); only this thread reports it.
      for (const m of main) if (m.aggregator === 'omit') m.aggregator = 'first';
      return AggregatorRegistry.aggregate([main, ...workers]).metrics();
    } finally {
      this.loopDelay.reset(); // the event-loop gauges cover one scrape interval
    }
  }

  /**
   * This thread's own series (no process defaults, no event-loop gauges) for the main thread's render(): an
   * acceptor thread's numbers, summed there with every other thread's.
   */
  async snapshot(): Promise<MetricsSnapshot> {
    const own = await this.register.getMetricsAsJSON();
    return own.filter((m) => !THREAD_LOCAL_GAUGE.test(m.name));
  }

  /** Snapshots merged by render(): live workers plus at most one retired sum (bounded even if threads churn). */
  get workerSnapshotCount(): number {
    return this.workers.all().length;
  }

  /** Stops the event-loop monitor and the worker channel (tests and shutdown). */
  close(): void {
    this.loopDelay.disable();
    this.workers.close();
  }
}

function recordOf<K extends string, V>(keys: readonly K[], make: (k: K) => V): Record<K, V> {
  const out = {} as Record<K, V>;
  for (const k of keys) out[k] = make(k);
  return out;
}
