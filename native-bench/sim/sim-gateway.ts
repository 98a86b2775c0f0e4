// One simulated gateway instance: its own registry view (a real replica table written by the real
// ReplicaTracker from simulated scrapes), its own in-flight ledger, KV estimator, router, policy and
// admission controller (on the run's virtual clock), driven through the interfaces the request pipeline
// uses: admission.acquire (which routes) → ledger.dispatch → router.dispatched → (first token)
// ledger.firstToken + router.firstToken → ledger.tokens → (end) ledger.end + router.finished +
// admission.released. The scrape
// reads each engine's gauges and counters as the mock's /metrics page states them, so the router sees the
// fleet as of the last scrape, never the engines' live state.
// Thread: the run's. Hot path: per request a route, a dispatch and the per-token ledger update.
import { AdmissionController } from '../../src/admission/admission-controller.ts';
import type { GatewayConfig } from '../../src/config/schema.ts';
import { InflightLedger, LEDGER_INFLIGHT } from '../../src/registry/inflight-ledger.ts';
import { FAILURE_KIND } from '../../src/registry/poll/protocol.ts';
import { EVENT, ReplicaTracker } from '../../src/registry/poll/replica-tracker.ts';
import { ParsedMetrics } from '../../src/registry/poll/vllm-metrics-parser.ts';
import { ReplicaTableWriter, type ReplicaRow } from '../../src/registry/replica-table.ts';
import { ROW_FLAG, ROW_STATE } from '../../src/registry/replica-table-layout.ts';
import { kvEventSinkOf, type KvEventSink } from '../../src/router/anchors/kv-event-sink.ts';
import { GpuTimeModel } from '../../src/gpu-time/gpu-time-model.ts';
import { ReplyLengths } from '../../src/gpu-time/reply-length/reply-lengths.ts';
import { KvEstimator } from '../../src/router/kv-estimate.ts';
import { Router } from '../../src/router/route.ts';
import type { FleetView } from '../../src/router/types.ts';
import type { MockEngine } from '../../test/mock-replica/engine/engine.ts';
import type { VirtualClock } from '../../test/mock-replica/engine/clocks.ts';
import type { SimPool } from './fleet.ts';
import { AdmitAll } from './native-admission/admit-all.ts';
import { equalTerms } from './equal-terms.ts';
import { nativeAdmission } from './native-admission/index.ts';
import type { NativeAdmission, SimAdmission } from './native-admission/types.ts';
import { buildPolicy } from './policies.ts';
import type { AdmissionMode } from './run-types.ts';
import type { SimKvEvents } from './sim-kv-events.ts';

export interface SimGatewayOptions {
  /** `none`: every request routed on arrival; `native`: the routed system's own admission (native-admission/); `expediter`: the gateway's AdmissionController. */
  admission: AdmissionMode;
  /** `routing.prefix_index: events`: the run's exact index, which this gateway's index policies read. */
  kvEvents?: SimKvEvents | null;
}

/** What the gateway needs from the simulated fleet: the engines (null while a replica is down) and their start times. */
export interface EngineSlots {
  readonly engines: ReadonlyArray<MockEngine | null>;
  /** process_start_time_seconds of each slot's current engine. */
  readonly startSeconds: Float64Array;
}

interface ReplicaInfoView {
  readonly id: string;
  readonly draining: boolean;
  readonly adapters: readonly string[] | null;
}

export class SimGateway implements FleetView {
  readonly index: number;
  readonly ledger: InflightLedger;
  readonly router: Router;
  readonly admission: SimAdmission;
  /** The native admission in use, or null under Expediter's (for the run's notes). */
  readonly native: NativeAdmission | null;
  readonly options: SimGatewayOptions;
  readonly kv: KvEstimator;
  /** The GPU-time model admission and kv-aware share, fed by the router's feedback. */
  readonly gpu: GpuTimeModel;
  /** Reply lengths this gateway has seen finish (src/gpu-time/reply-length/): each request's forecast. */
  readonly replies: ReplyLengths;
  readonly pool: SimPool;
  /** Where the engines' KV events go when this gateway's policy reads them (its own index); else null. */
  readonly kvEvents: KvEventSink | null;
  private readonly clock: VirtualClock;
  private readonly table: ReplicaTableWriter;
  private readonly trackers: ReplicaTracker[];
  private readonly parsed = new ParsedMetrics();
  private readonly members: readonly number[];
  private readonly infos: readonly ReplicaInfoView[];
  private readonly downAfter: number;
  private readonly loraEnabled: boolean;
  /** Restarts this gateway's registry detected (each one reset the router's knowledge of the slot). */
  restartsSeen = 0;

  constructor(index: number, pool: SimPool, cfg: GatewayConfig, clock: VirtualClock, options: SimGatewayOptions = { admission: 'expediter' }) {
    this.index = index;
    this.options = options;
    this.pool = pool;
    this.clock = clock;
    const n = pool.replicas.length;
    // One thread reads and writes them (this run's): plain arithmetic and loads, the same figures as Atomics.
    this.ledger = new InflightLedger(n, true);
    this.table = new ReplicaTableWriter(n, true);
    this.downAfter = cfg.registry.down_after_failures;
    this.loraEnabled = pool.adapters.length > 0;
    this.members = Object.freeze(Array.from({ length: n }, (_, i) => i));
    this.infos = pool.replicas.map((r) => ({ id: r.id, draining: false, adapters: r.adapters }));
    this.trackers = pool.replicas.map((r, slot) => {
      const t = new ReplicaTracker(slot, slot + 1, r.id, `http://${r.id}.sim:8000`, pool.blockSize);
      t.row.generation = 1;
      t.row.assignId = slot + 1;
      t.row.state = ROW_STATE.UNKNOWN;
      this.table.write(slot, t.row);
      return t;
    });
    const events = options.kvEvents ?? null;
    this.gpu = new GpuTimeModel(cfg.pools, this, cfg.admission.stale_ms);
    this.replies = new ReplyLengths(cfg.pools);
    this.router = events !== null ? events.router(cfg, this, this.gpu) : new Router(buildPolicy(cfg, this, this.gpu), this, null, null, this.gpu);
    this.kvEvents = kvEventSinkOf(this.router.policy);
    this.kv = new KvEstimator(this, n, cfg.admission.stale_ms);
    const native = options.admission === 'native'
      ? nativeAdmission(this.router.policy, { fleet: this, router: this.router, clock, profile: pool.profile })
      : options.admission === 'none' ? new AdmitAll(this.router) : null;
    // Under Expediter's admission every ranked policy's pick is judged as kv-aware's own fit filter judges
    // kv-aware's, on the events index when the engines publish events (equal-terms.ts).
    if (native === null) this.router.setFitFirst(equalTerms(cfg, this, this.kv, this.gpu, pool.blockSize, events?.index ?? null));
    this.native = native;
    this.admission = native ?? new AdmissionController({
      fleet: this, kv: this.kv, gpu: this.gpu, router: this.router, clock,
      cfg: cfg.admission, connectionsPerReplica: cfg.upstream.connections_per_replica, pollMs: cfg.registry.scrape_interval_ms,
    });
  }

  // ---- FleetView -------------------------------------------------------------------------------------
  candidates(_poolId: string): readonly number[] {
    return this.members;
  }

  isHealthy(slot: number): boolean {
    return this.table.state(slot) === ROW_STATE.UP && this.table.dataPlaneFailures(slot) < this.downAfter;
  }

  replica(slot: number): ReplicaInfoView {
    return this.infos[slot]!;
  }

  residentAdapters(slot: number): readonly string[] {
    return this.trackers[slot]!.runningAdapters;
  }

  readRow(slot: number, out: ReplicaRow): boolean {
    return this.table.read(slot, out) && out.assignId === slot + 1;
  }

  prefixAffinityOff(slot: number): boolean {
    return (this.table.flags(slot) & ROW_FLAG.PREFIX_AFFINITY_OFF) !== 0;
  }

  nowMs(): number {
    return this.clock.now();
  }

  // ---- data plane ------------------------------------------------------------------------------------
  /** The connection to `slot` was refused (its process is gone). */
  dataPlaneFailure(slot: number): void {
    this.table.reportDataPlaneFailure(slot);
  }

  dataPlaneSuccess(slot: number): void {
    this.table.reportDataPlaneSuccess(slot);
  }

  // ---- registry poller -------------------------------------------------------------------------------
  /** One scrape of every replica, as the poller does each scrape_interval_ms. */
  scrape(fleet: EngineSlots): void {
    for (let slot = 0; slot < this.trackers.length; slot++) this.scrapeSlot(fleet, slot);
  }

  /** One scrape of one replica (llm-d's per-pod refresh; scrape() does every replica in one tick). */
  scrapeSlot(fleet: EngineSlots, slot: number): void {
    const nowMs = this.clock.now();
    const m = this.parsed;
    const tracker = this.trackers[slot]!;
    const engine = fleet.engines[slot];
    let events: number;
    if (!engine) {
      events = tracker.onFailure(FAILURE_KIND.UNREACHABLE, 'connection refused', nowMs, this.downAfter);
    } else {
      const s = engine.counters();
      m.running = s.running;
      m.waiting = s.waiting;
      m.kvUsage = s.kv_cache_usage_perc;
      m.speaksV1 = true;
      m.speaksLegacy = false;
      m.numGpuBlocks = engine.config.numGpuBlocks;
      m.blockSize = engine.config.blockSize;
      m.loraEnabled = this.loraEnabled;
      m.maxLoras = this.loraEnabled ? s.lora.max_lora : 0;
      m.runningAdapters = this.loraEnabled ? s.lora.running_lora_adapters.join(',') : '';
      m.waitingAdapters = this.loraEnabled ? s.lora.waiting_lora_adapters.join(',') : '';
      m.preemptionsTotal = s.num_preemptions_total;
      m.prefixQueriesTotal = s.prefix_cache_queries_total;
      m.prefixHitsTotal = s.prefix_cache_hits_total;
      m.promptTokensTotal = s.prompt_tokens_total;
      m.generationTokensTotal = s.generation_tokens_total;
      m.processStartSeconds = fleet.startSeconds[slot]!;
      m.earliestCreatedSeconds = fleet.startSeconds[slot]!;
      events = tracker.onGood(m, nowMs, 0, this.ledger.get(slot, LEDGER_INFLIGHT));
      // Half-open, as the poller: a good scrape gives a replica that data-plane failures took out another chance.
      const dp = this.table.dataPlaneFailures(slot);
      if (dp !== 0) this.table.clearDataPlaneFailuresIf(slot, dp);
    }
    this.table.write(slot, tracker.row);
    if ((events & EVENT.RESTART) !== 0) {
      // The gateway forgets what a restarted replica held (its prefix cache is empty).
      this.restartsSeen++;
      this.router.replicaReset(slot);
      this.kv.reset(slot);
    }
  }
}
