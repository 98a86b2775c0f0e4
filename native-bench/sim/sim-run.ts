// The discrete-event loop of one run: one MockEngine per replica of the pool on one VirtualClock, N simulated
// gateways (each with its own registry view, ledger, router and policy) scraping them every
// registry.scrape_interval_ms, the workload's arrivals spread over the gateways at random, kills and restarts
// at their times, and the measurements of the requests that arrive after the warm-up.
// Thread: the run's (main or a sweep worker). Everything is synchronous: virtual time costs only the events.
import { VirtualClock } from '../../test/mock-replica/engine/clocks.ts';
import { MockEngine } from '../../test/mock-replica/engine/engine.ts';
import type { EngineOptions, EngineRequestSpec } from '../../test/mock-replica/engine/types.ts';
import type { AdmissionOutcome } from '../../src/admission/types.ts';
import { ReplicaRow } from '../../src/registry/replica-table.ts';
import type { GatewayConfig } from '../../src/config/schema.ts';
import type { Decision } from '../../src/router/types.ts';
import { kvReplyTokens } from '../../src/gpu-time/reply-length/reply-forecast.ts';
import { loadFleet, withKvScale, withPrefixIndex, type SimFleet, type SimPool } from './fleet.ts';
import { KvEventFeed } from './kv-event-feed.ts';
import { LiveRequest, type RequestSink } from './live-request.ts';
import { RunMetrics, type RunFigures } from './metrics.ts';
import { policyOf, withPolicy } from './policies.ts';
import { Prng } from './prng.ts';
import type { AdmissionMode, FaultSpec, RunSpec } from './run-types.ts';
import { SimGateway } from './sim-gateway.ts';
import { SimKvEvents } from './sim-kv-events.ts';
import { makeWorkload, parseWorkload, runDurationMs, windowStartMs } from './workloads.ts';
import type { SimRequest, Workload } from './workload-types.ts';

/** Share of each run's simulated time whose requests and samples are not measured. */
export const WARMUP_SHARE = 0.1;
/** After the last arrival, requests still streaming get at most this long before the run is cut. */
export const DRAIN_MS = 30_000;
/** With --retry-shed, a client sends a shed request again at most this many times. */
const MAX_SHED_RETRIES = 5;
/** process_start_time_seconds of an engine started at virtual time 0. */
const EPOCH_SECONDS = 1.8e9;

export interface RunState {
  figures: RunFigures;
  simulatedRequests: number;
  restartsSeen: number;
  admission: string;
  /** routing.prefix_index the run's gateways had. */
  prefixIndex: GatewayConfig['routing']['prefix_index'];
  /** Where the run's window of a trace starts, trace seconds; null for seed-mix. */
  traceWindowS: number | null;
  /** `native`: requests the native admission rejected or queued, over every gateway; else null. */
  nativeInterventions: number | null;
}

/** How the run admitted, for its notes: the mode, then what it does. */
export function admissionNote(mode: AdmissionMode, description: string, retryShed: boolean): string {
  return `${mode}: ${description}${retryShed ? ', shed requests retried after Retry-After' : ', shed requests not retried'}`;
}

export interface SimOptions {
  pool: SimPool;
  fleet: SimFleet;
  policy: string;
  workload: Workload;
  durationMs: number;
  gateways: number;
  seed: number;
  retryShed?: boolean;
  kills?: readonly FaultSpec[];
  restarts?: readonly FaultSpec[];
  /** Arrivals before this are not measured (default WARMUP_SHARE of the run; 0 measures every request). */
  warmupMs?: number;
  /** `native`: each gateway admits as the routed system does upstream (native-admission/); default expediter. */
  admission?: AdmissionMode;
  /** Engines off their profile (RunSpec.engineErrorPct, stepJitterPct, engineBiasPct); default 0: the profile exactly. */
  engineErrorPct?: number;
  stepJitterPct?: number;
  engineBiasPct?: number;
  /** Decode batches costed as vLLM's CUDA-graph batch (default false). */
  batchPadding?: boolean;
  /** Gateway → engine latency of each dispatch, ms (default 0: the engine has it at the instant of dispatch). */
  dispatchMs?: number;
}

/**
 * One replica's engine options: the pool's shared bias (one draw per parameter, fixed by the run's seed) and
 * its own step-time draw on top (fixed by the seed and the replica's slot).
 */
function slotEngineOptions(base: EngineOptions, seed: number, slot: number, errorPct: number, jitterPct: number, biasPct: number): EngineOptions {
  if (errorPct === 0 && jitterPct === 0 && biasPct === 0) return base;
  return {
    ...base,
    stepTimeNoise: { errorPct, jitterPct, seed: (Math.imul(seed, 0x01000193) ^ Math.imul(slot + 1, 0x9e3779b1)) >>> 0, biasPct, biasSeed: Math.imul(seed, 0x01000193) >>> 0 },
  };
}

export class FleetSim implements RequestSink {
  readonly clock = new VirtualClock(0);
  /** routing.prefix_index: events: the engines' cache changes feeding the gateways' events index; else null. */
  private readonly kvEvents: SimKvEvents | null;
  readonly engines: Array<MockEngine | null>;
  readonly startSeconds: Float64Array;
  readonly inflightTokens: Float64Array;
  readonly gateways: SimGateway[] = [];
  readonly metrics = new RunMetrics();
  /** The engines' KV events, to every gateway whose policy reads them. */
  readonly kvFeed = new KvEventFeed();
  private readonly pool: SimPool;
  private readonly engineOptions: EngineOptions[];
  private readonly workload: Workload;
  private readonly durationMs: number;
  private readonly warmupMs: number;
  private readonly scrapeMs: number;
  private readonly maxAttempts: number;
  private readonly retryShed: boolean;
  private readonly headroom: number;
  private readonly dispatchMs: number;
  private readonly prefixIndex: GatewayConfig['routing']['prefix_index'];
  private readonly admissionMode: AdmissionMode;
  private readonly pick: Prng;
  private readonly live = new Set<LiveRequest>();
  private readonly row = new ReplicaRow();
  /** Attempts sent again: cut before their first token, or refused by a dead replica. */
  retries = 0;
  private nextArrival: SimRequest | null = null;
  private arrivalsDone = false;
  /** The run is over: aborts and admissions from here on are the teardown's, not the workload's. */
  private ending = false;
  private measuredLive = 0;
  private simulated = 0;
  /** Preemptions of engines that were replaced, so the counters survive a restart. */
  private retiredPreemptions = 0;
  private preemptionsAtWarmup = 0;

  constructor(o: SimOptions) {
    this.pool = o.pool;
    this.workload = o.workload;
    this.durationMs = o.durationMs;
    this.warmupMs = o.warmupMs ?? WARMUP_SHARE * o.durationMs;
    const cfg = withPolicy(o.fleet.config, o.policy);
    this.scrapeMs = cfg.registry.scrape_interval_ms;
    this.maxAttempts = cfg.upstream.max_attempts;
    this.retryShed = o.retryShed === true;
    this.headroom = cfg.admission.headroom_ratio;
    this.prefixIndex = cfg.routing.prefix_index;
    this.dispatchMs = o.dispatchMs ?? 0;
    this.pick = new Prng(o.seed, 11);
    this.admissionMode = o.admission ?? 'expediter';
    const n = o.pool.replicas.length;
    const base: EngineOptions = {
      profile: o.pool.profile, blockSize: o.pool.blockSize, maxLoras: o.pool.maxLoras, loras: [...o.pool.adapters], numGpuBlocks: o.pool.numGpuBlocks,
      cudaGraphPadding: o.batchPadding === true, histograms: false, // the scrape reads counters() only
    };
    this.engineOptions = Array.from({ length: n }, (_, slot) => slotEngineOptions(base, o.seed, slot, o.engineErrorPct ?? 0, o.stepJitterPct ?? 0, o.engineBiasPct ?? 0));
    this.engines = this.engineOptions.map((eo) => new MockEngine(eo, this.clock));
    const faultless = (o.kills ?? []).length === 0 && (o.restarts ?? []).length === 0;
    this.kvEvents = SimKvEvents.forConfig(cfg, n, this.engines[0]!.config.numGpuBlocks, faultless);
    this.startSeconds = new Float64Array(n).fill(EPOCH_SECONDS);
    this.inflightTokens = new Float64Array(n);
    for (let g = 0; g < o.gateways; g++) this.gateways.push(new SimGateway(g, o.pool, cfg, this.clock, { admission: this.admissionMode, kvEvents: this.kvEvents }));
    // One feed from every engine's block pool: the anchors' own event-fed indexes and, with
    // routing.prefix_index: events and kv-aware routing, the exact index it reads.
    for (const gw of this.gateways) if (gw.kvEvents !== null) this.kvFeed.subscribe(gw.kvEvents);
    // Under Expediter's admission every policy's pick is judged on that index (equal-terms.ts).
    if (this.kvEvents !== null && (SimKvEvents.readBy(cfg.routing.policy) || this.admissionMode === 'expediter')) this.kvFeed.subscribe(this.kvEvents);
    for (let slot = 0; slot < n; slot++) this.attachEngine(slot, this.engines[slot]!);
    // Each gateway's poller scrapes on its own phase; the first scrape is at once (a gateway opens its port
    // only after the first scrape of every replica). llm-d refreshes each pod on the pod's own ticker, started
    // when the pod was discovered (llm-d-inference-scheduler pkg/epp/datalayer/collector.go: one Collector
    // goroutine and time.Ticker per endpoint), so its scrapes are spread over the interval, not one tick.
    const perPod = policyOf(cfg) === 'llm-d' || policyOf(cfg) === 'llm-d-precise';
    for (const gw of this.gateways) {
      const phase = (gw.index * this.scrapeMs) / o.gateways;
      if (perPod) {
        gw.scrape(this);
        for (let slot = 0; slot < n; slot++) {
          const tickSlot = (): void => {
            gw.scrapeSlot(this, slot);
            this.clock.setTimer(this.scrapeMs, tickSlot);
          };
          this.clock.setTimer(phase + ((slot + 1) * this.scrapeMs) / n, tickSlot);
        }
        if (gw.index === 0) {
          const sampleTick = (): void => {
            this.sample();
            this.clock.setTimer(this.scrapeMs, sampleTick);
          };
          this.clock.setTimer(0, sampleTick);
        }
        continue;
      }
      const tick = (): void => {
        gw.scrape(this);
        if (gw.index === 0) this.sample();
        this.clock.setTimer(this.scrapeMs, tick);
      };
      this.clock.setTimer(phase, tick);
    }
    this.clock.setTimer(this.warmupMs, () => {
      this.preemptionsAtWarmup = this.preemptionsNow();
    });
    this.clock.setTimer(this.durationMs, () => {
      this.metrics.preemptions = this.preemptionsNow() - this.preemptionsAtWarmup;
    });
    for (const f of o.kills ?? []) this.clock.setTimer(f.atS * 1000, () => this.kill(this.slotOf(f.replica)));
    for (const f of o.restarts ?? []) this.clock.setTimer(f.atS * 1000, () => this.restart(this.slotOf(f.replica)));
    this.scheduleArrival();
  }

  now(): number {
    return this.clock.now();
  }

  /** Runs to the end: every measured request settled, or the drain limit. */
  run(): RunState {
    const hardEnd = this.durationMs + DRAIN_MS;
    this.clock.runUntil(() => (this.arrivalsDone && this.measuredLive === 0 && this.clock.now() >= this.durationMs) || this.clock.now() >= hardEnd);
    // Requests still streaming at the cut are judged on what they produced so far; closing the engines then
    // aborts them, which must not send anything anywhere.
    this.ending = true;
    for (const lr of [...this.live]) this.settle(lr, false);
    for (const e of this.engines) e?.close();
    let restartsSeen = 0;
    let interventions = 0;
    for (const g of this.gateways) {
      restartsSeen += g.restartsSeen;
      interventions += g.native?.interventions ?? 0;
    }
    return {
      figures: this.metrics.figures(this.durationMs - this.warmupMs),
      simulatedRequests: this.simulated,
      restartsSeen,
      prefixIndex: this.prefixIndex,
      traceWindowS: null,
      nativeInterventions: this.admissionMode === 'native' ? interventions : null,
      admission: admissionNote(this.admissionMode, this.gateways[0]!.native?.description ?? `the gateway's AdmissionController per gateway (headroom ${this.headroom}, every tenant standard tier)`, this.retryShed),
    };
  }

  private slotOf(replicaId: string): number {
    const slot = this.pool.replicas.findIndex((r) => r.id === replicaId);
    if (slot < 0) throw new RangeError(`no replica ${replicaId} in pool ${this.pool.id}`);
    return slot;
  }

  private preemptionsNow(): number {
    let n = this.retiredPreemptions;
    for (const e of this.engines) if (e) n += e.counters().num_preemptions_total;
    return n;
  }

  /** The replica's process dies: in-flight requests lose their connection, scrapes are refused. */
  kill(slot: number): void {
    const engine = this.engines[slot];
    if (!engine) return;
    this.retiredPreemptions += engine.counters().num_preemptions_total;
    this.engines[slot] = null;
    this.kvFeed.detach(slot, engine);
    engine.close();
  }

  /** The replica comes back empty (a new process: new start time, empty prefix cache). */
  restart(slot: number): void {
    this.kill(slot);
    this.startSeconds[slot] = EPOCH_SECONDS + this.clock.now() / 1000;
    const engine = new MockEngine(this.engineOptions[slot]!, this.clock);
    this.engines[slot] = engine;
    this.attachEngine(slot, engine);
  }

  /** The engine now serving `slot` publishes its KV events; it starts empty, so the exact index is live at once. */
  private attachEngine(slot: number, engine: MockEngine): void {
    this.kvFeed.attach(slot, engine);
    this.kvEvents?.live(slot);
  }

  private scheduleArrival(): void {
    const r = this.workload.next();
    if (!r) {
      this.arrivalsDone = true;
      return;
    }
    this.nextArrival = r;
    this.clock.setTimer(r.atMs - this.clock.now(), this.onArrival);
  }

  private readonly onArrival = (): void => {
    const r = this.nextArrival!;
    this.nextArrival = null;
    this.arrive(r);
    this.scheduleArrival();
  };

  private arrive(r: SimRequest): void {
    this.simulated++;
    const measured = r.atMs >= this.warmupMs && r.atMs < this.durationMs;
    const gw = this.gateways.length === 1 ? this.gateways[0]! : this.gateways[this.pick.int(this.gateways.length)]!;
    const lr = new LiveRequest(this, r, gw, this.pool.id, this.pool.blockSize, measured);
    this.live.add(lr);
    if (measured) {
      this.metrics.offered++;
      this.measuredLive++;
    }
    this.dispatch(lr);
  }

  retry(lr: LiveRequest): void {
    this.retries++;
    lr.tokens = 0;
    this.dispatch(lr);
  }

  /** One attempt through admission, which routes it (now or when it leaves the queue). */
  private dispatch(lr: LiveRequest): void {
    if (this.ending || lr.attempts >= this.maxAttempts) {
      this.settle(lr, false);
      return;
    }
    lr.gw.admission.acquire(lr.admission, lr.onAdmission);
  }

  admitted(lr: LiveRequest, o: AdmissionOutcome): void {
    if (this.ending) return;
    switch (o.kind) {
      case 'admitted':
        if (lr.measured && lr.attempts === 0 && lr.sheds === 0) this.metrics.admitted++;
        this.send(lr, o.slot, o.decision);
        return;
      case 'rejected':
        if (o.shed === null) break; // context_length_exceeded: a request the pool can never hold
        if (lr.measured) this.metrics.recordShed(o.queuedMs, o.shed !== 'deadline_passed');
        lr.sheds++;
        if (this.retryShed && lr.sheds <= MAX_SHED_RETRIES) {
          // The client honours Retry-After and sends the same request again.
          this.clock.setTimer((o.rejection.retryAfterSeconds ?? 1) * 1000, () => this.dispatch(lr));
          return;
        }
        lr.shedLast = true;
        break;
      case 'unroutable':
      case 'cancelled':
        break;
    }
    this.settle(lr, false);
  }

  /**
   * The admitted attempt goes to `slot`: ledger and router feedback as the pipeline records a dispatch, then
   * the engine. A dead replica refuses the connection: the attempt ends at once and the request is sent again
   * (on the next tick: admission is still inside its callback).
   */
  private send(lr: LiveRequest, slot: number, d: Decision): void {
    const gw = lr.gw;
    const req = lr.req;
    const bs = this.pool.blockSize;
    lr.attempts++;
    const uncached = Math.max(0, req.promptTokens - d.cachedBlocks * bs);
    lr.decision = d;
    lr.slot = slot;
    // Admission reserved the prompt and the reply's KV figure (its forecast), as the pipeline does.
    lr.reserved = req.promptTokens + kvReplyTokens(lr.route);
    gw.ledger.dispatchInto(lr, slot, req.promptTokens, req.maxTokens, bs, uncached, lr.route.reply ?? null);
    lr.dispatchMs = this.clock.now();
    gw.router.dispatched(lr.route, d);
    const engine = this.engines[slot];
    if (!engine) {
      gw.dataPlaneFailure(slot);
      gw.ledger.end(lr);
      gw.router.finished(lr.route, d, null, null);
      gw.admission.released(this.pool.id, lr.reserved);
      lr.excluded.push(slot);
      this.retries++;
      this.clock.setTimer(0, () => this.dispatch(lr));
      return;
    }
    gw.dataPlaneSuccess(slot);
    this.inflightTokens[slot]! += req.promptTokens;
    const spec: EngineRequestSpec = {
      id: `${req.seq}.${lr.attempts}.${lr.sheds}`, promptTokens: req.promptTokens, blockHashes: req.blockHashes,
      outputTokens: req.outputTokens, finishReason: req.outputTokens === req.maxTokens ? 'length' : 'stop', adapter: req.adapter,
      ...(req.replyHashes ? { outputBlockHashes: req.replyHashes } : {}),
    };
    if (this.dispatchMs === 0) {
      engine.add(spec, lr);
      return;
    }
    // On its way to the engine (one timer per dispatch). A replica that died or restarted meanwhile dropped
    // the connection: the attempt ends as a killed replica's would, and is retried elsewhere.
    this.clock.setTimer(this.dispatchMs, () => {
      if (this.ending) return;
      if (this.engines[slot] === engine) engine.add(spec, lr);
      else lr.onFinish('abort');
    });
  }

  settle(lr: LiveRequest, finished: boolean): void {
    if (lr.settled) return;
    lr.settled = true;
    this.live.delete(lr);
    if (!lr.measured) return;
    this.measuredLive--;
    const m = this.metrics;
    const ttft = lr.firstTokenMs - lr.req.atMs;
    // Failed: an error answer (no replica, every attempt refused or cut, too long for the pool), not a
    // request the run's end caught still waiting or streaming.
    if ((Number.isNaN(ttft) && !finished && !lr.shedLast && !this.ending) || lr.broken) m.failed++;
    const tpot = lr.tokens > 1 ? (lr.lastTokenMs - lr.firstTokenMs) / (lr.tokens - 1) : 0;
    const predicted = lr.decision ? lr.decision.cachedBlocks * this.pool.blockSize : 0;
    const met = m.record(this.pool.profile, lr.req.promptTokens, ttft, tpot, finished, lr.broken, lr.cachedTokens, Math.min(predicted, lr.req.promptTokens));
    if (lr.decision !== null) {
      m.recordAdmitted(met);
      // Predicted at dispatch, so held against dispatch → first token of that attempt: the GPU-time model's
      // figure where the gateway has one, else the policy's own.
      const d = lr.decision;
      const p = Number.isFinite(d.gpuTtftMs) ? d.gpuTtftMs : d.predictedTtftMs;
      if (!Number.isNaN(lr.firstTokenMs)) m.recordPrediction(p, lr.firstTokenMs - lr.dispatchMs);
      // The reply's length as the policy predicted it at dispatch (reply_length_prediction), against what the
      // engine produced: only replies that ended on their own (a cut stream's length is not the reply's).
      if (finished) m.recordReplyPrediction(d.predictedReplyTokens, lr.tokens);
    }
  }

  /** KV use and in-flight balance as gateway 0 sees them at its scrape, during the measured window. */
  private sample(): void {
    const now = this.clock.now();
    if (now < this.warmupMs || now >= this.durationMs) return;
    const gw = this.gateways[0]!;
    let kv = 0;
    let up = 0;
    let max = 0;
    let sum = 0;
    for (let slot = 0; slot < this.engines.length; slot++) {
      if (!this.engines[slot]) continue;
      if (gw.readRow(slot, this.row) && !Number.isNaN(this.row.kvUsage)) kv += this.row.kvUsage;
      up++;
      const t = this.inflightTokens[slot]!;
      sum += t;
      if (t > max) max = t;
    }
    if (up > 0) this.metrics.sample(kv / up, max, sum / up);
  }
}

/** Builds and runs one sweep point. */
export function simulateRun(spec: RunSpec): RunState {
  const fleet = withPrefixIndex(loadFleet(spec.fleet), spec.prefixIndex);
  const poolIndex = fleet.pools.findIndex((p) => p.id === spec.pool);
  if (poolIndex < 0) throw new RangeError(`no pool ${spec.pool} in fleet ${spec.fleet}`);
  const pool = withKvScale(fleet.pools[poolIndex]!, spec.kvScale);
  const wk = parseWorkload(spec.workload);
  const durationMs = runDurationMs(wk, spec.minutes, spec.traceSpeed);
  // The workload's seed depends on the pool, not the policy: every policy at a load point sees the same requests.
  // A trace's window and its clients' caps depend on the seed alone: every contender at a seed replays the same.
  const workload = makeWorkload(wk, pool, {
    rps: spec.offeredRps ?? 0, speed: spec.traceSpeed, durationMs, seed: spec.seed * 1000 + poolIndex, traceSeed: spec.seed, maxTokens: spec.maxTokens,
  });
  const sim = new FleetSim({
    pool, fleet, policy: spec.policy, workload, durationMs, gateways: spec.gateways, seed: spec.seed,
    retryShed: spec.retryShed, kills: spec.kills, restarts: spec.restarts,
    admission: spec.admission, engineErrorPct: spec.engineErrorPct, stepJitterPct: spec.stepJitterPct, engineBiasPct: spec.engineBiasPct,
    batchPadding: spec.batchPadding, dispatchMs: spec.dispatchMs,
  });
  const state = sim.run();
  const start = windowStartMs(wk, spec.seed);
  state.traceWindowS = start === null ? null : Math.round(start) / 1000;
  return state;
}
