// A small fleet for admission tests: replicas described by plain specs (KV size, scraped usage, scrape time,
// health), a real InflightLedger and KvEstimator, the real Router with a policy chosen per test, and the mock
// engine's VirtualClock, so queue deadlines and polls run in virtual time. Helpers dispatch admitted requests
// into the ledger inside the callback, as the pipeline does.
import type { AdmissionOutcome, AdmissionRequest, SlaTier } from '../../../src/admission/types.ts';
import { AdmissionController } from '../../../src/admission/admission-controller.ts';
import type { AdmissionTicket } from '../../../src/admission/pool-admission.ts';
import { configSchema, type GatewayConfig } from '../../../src/config/schema.ts';
import { InflightLedger, type LedgerEntry } from '../../../src/registry/inflight-ledger.ts';
import type { ReplicaRow } from '../../../src/registry/replica-table.ts';
import { GpuTimeModel } from '../../../src/gpu-time/gpu-time-model.ts';
import { KvEstimator } from '../../../src/router/kv-estimate.ts';
import { LeastOutstandingTokensPolicy } from '../../../src/router/policies/least-outstanding-tokens.ts';
import { Router } from '../../../src/router/route.ts';
import type { Decision, FleetView, RouteRequest, RoutingPolicy } from '../../../src/router/types.ts';
import { VirtualClock } from '../../mock-replica/engine/clocks.ts';

export interface Spec {
  id: string;
  pool?: string;
  healthy?: boolean;
  draining?: boolean;
  /** num_gpu_blocks; undefined = the replica reports no KV size. */
  blocks?: number;
  /** Scraped KV usage 0..1. */
  usage?: number;
  running?: number;
  /** This gateway's requests in flight there when the row's scrape was sent. */
  inflightAtScrape?: number;
  /** Virtual ms of the last good scrape; undefined = never scraped. */
  scrapedAt?: number;
}

export class FakeFleet implements FleetView {
  readonly ledger: InflightLedger;
  readonly specs: Spec[];
  readonly clock: VirtualClock;

  constructor(specs: Spec[], clock: VirtualClock) {
    this.specs = specs;
    this.clock = clock;
    this.ledger = new InflightLedger(specs.length);
  }

  candidates(poolId: string): readonly number[] {
    return this.specs.flatMap((s, slot) => ((s.pool ?? 'p') === poolId ? [slot] : []));
  }

  isHealthy(slot: number): boolean {
    return this.specs[slot]!.healthy !== false;
  }

  replica(slot: number): { id: string; draining: boolean; adapters: readonly string[] | null } {
    const s = this.specs[slot]!;
    return { id: s.id, draining: s.draining === true, adapters: null };
  }

  residentAdapters(): readonly string[] {
    return [];
  }

  readRow(slot: number, out: ReplicaRow): boolean {
    const s = this.specs[slot]!;
    if (s.scrapedAt === undefined) return false;
    out.lastGoodScrapeMs = s.scrapedAt;
    out.numGpuBlocks = s.blocks ?? Number.NaN;
    out.blockSize = 16;
    out.kvUsage = s.usage ?? 0;
    out.running = s.running ?? 0;
    out.waiting = 0;
    out.inflightAtScrape = s.inflightAtScrape ?? 0;
    return true;
  }

  prefixAffinityOff(): boolean {
    return false;
  }

  nowMs(): number {
    return this.clock.now();
  }

  /** A new scrape of every replica at the current virtual time, with the given usage. */
  scrape(usage: Record<string, number> = {}): void {
    for (const s of this.specs) {
      s.scrapedAt = this.clock.now();
      if (usage[s.id] !== undefined) s.usage = usage[s.id];
    }
  }
}

/** A policy that picks the first eligible replica and reports what the test says about fit and cache. */
export class ScriptedPolicy implements RoutingPolicy {
  readonly name = 'scripted';
  fits = true;
  cachedBlocks = 0;

  pick(_req: RouteRequest, eligible: readonly number[], _fleet: FleetView, out: Decision): number {
    out.fits = this.fits;
    out.cachedBlocks = this.cachedBlocks;
    return eligible[0] ?? -1;
  }

  describe(): string {
    return '';
  }
}

export interface Harness {
  clock: VirtualClock;
  fleet: FakeFleet;
  adm: AdmissionController;
  gpu: GpuTimeModel;
  router: Router;
  cfg: GatewayConfig;
  /** Outcomes by request name, filled by the callbacks. */
  outcomes: Map<string, AdmissionOutcome>;
  entries: Map<string, LedgerEntry>;
  tickets: Map<string, AdmissionTicket>;
  /** Acquires `name`; an admitted request is dispatched into the ledger inside the callback. */
  ask(name: string, r?: Partial<RouteRequest> & { n?: number; tier?: SlaTier }): AdmissionTicket;
  /** Ends `name`'s dispatch (ledger.end) and tells admission, as the pipeline does at the end of an attempt. */
  finish(name: string): void;
}

/** TTFT budgets out of reach: the KV rules judged alone, with the tiers' queue allowances deciding the waits. */
const KV_ONLY = { ttft_ms_by_tier: { premium: 600_000, standard: 600_000, batch: 600_000 } };

/**
 * `gpuTime`: admit against the default TTFT budgets (the GPU-time rules); otherwise the budgets are out of
 * reach and only the KV and queue rules act.
 */
export function harness(specs: Spec[], opts: { admission?: Record<string, unknown>; engine?: Record<string, unknown>; policy?: RoutingPolicy; connections?: number; now?: number; gpuTime?: boolean } = {}): Harness {
  const clock = new VirtualClock(opts.now ?? 10_000);
  for (const s of specs) if (s.scrapedAt === undefined && !('scrapedAt' in s)) s.scrapedAt = clock.now();
  const fleet = new FakeFleet(specs, clock);
  const cfg = configSchema.parse({
    pools: [{ id: 'p', model: 'm', replicas: [{ id: 'x', url: 'http://127.0.0.1:1' }], engine: opts.engine ?? {} }],
    admission: { ...(opts.gpuTime === true ? {} : KV_ONLY), ...opts.admission },
    upstream: { connections_per_replica: opts.connections ?? 1024 },
  });
  const gpu = new GpuTimeModel(cfg.pools, fleet, cfg.admission.stale_ms);
  const router = new Router(opts.policy ?? new LeastOutstandingTokensPolicy(), fleet, null, null, gpu);
  const adm = new AdmissionController({
    fleet, kv: new KvEstimator(fleet, specs.length, cfg.admission.stale_ms), gpu, router, clock, cfg: cfg.admission,
    connectionsPerReplica: cfg.upstream.connections_per_replica, pollMs: 100,
  });
  const outcomes = new Map<string, AdmissionOutcome>();
  const entries = new Map<string, LedgerEntry>();
  const tickets = new Map<string, AdmissionTicket>();
  const reservations = new Map<string, number>();
  const h: Harness = {
    clock, fleet, adm, gpu, router, cfg, outcomes, entries, tickets,
    ask(name, r = {}) {
      const { n = 1, tier = 'standard', ...route } = r;
      const req: AdmissionRequest = {
        route: { poolId: 'p', adapter: null, promptTokens: 100, maxTokens: 100, blockHashes: new Float64Array(0), excluded: [], ...route },
        n, tier, blockSize: 16, promptParam: 'messages',
      };
      const t = adm.acquire(req, (o) => {
        outcomes.set(name, o);
        if (o.kind === 'admitted') {
          entries.set(name, fleet.ledger.dispatch(o.slot, req.route.promptTokens, req.route.maxTokens * n, 16));
          router.dispatched(req.route, o.decision);
          reservations.set(name, req.route.promptTokens + req.route.maxTokens * n);
        }
      });
      tickets.set(name, t);
      return t;
    },
    finish(name) {
      const e = entries.get(name);
      if (e === undefined) throw new Error(`${name} was not dispatched`);
      fleet.ledger.end(e);
      adm.released('p', reservations.get(name)!);
    },
  };
  return h;
}

export function kindOf(h: Harness, name: string): string {
  const o = h.outcomes.get(name);
  if (o === undefined) return 'pending';
  if (o.kind === 'rejected') return `rejected:${o.rejection.code}`;
  if (o.kind === 'admitted') return `admitted:${h.fleet.specs[o.slot]!.id}`;
  if (o.kind === 'unroutable') return `unroutable:${o.reason}`;
  return o.kind;
}
