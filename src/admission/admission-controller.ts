// The gateway's admission stage: one PoolAdmission per pool (created on first use, so pools added by a
// config reload need nothing), sharing the fleet view, the KV estimate, the clock and the metrics sink.
// Built once per gateway and kept across reloads (queued requests hold callbacks into it); reconfigure()
// swaps the config, the router and the limits in place. The fleet simulator builds one the same way over its
// simulated fleet and a virtual clock.
// Thread: the acceptor. No I/O, no await: acquire() decides or queues, and every later decision runs from
// released(), cancel() or the pool's Clock timer.
import type { GpuTimeModel } from '../gpu-time/gpu-time-model.ts';
import type { KvEstimator } from '../router/kv-estimate.ts';
import type { FleetView } from '../router/types.ts';
import type { Clock } from '../util/clock.ts';
import { PoolAdmission, type AdmissionDeps, type AdmissionTicket } from './pool-admission.ts';
import { PoolBudgetReader } from './pool-budget.ts';
import type { AdmissionConfig, AdmissionDone, AdmissionMetrics, AdmissionRequest, RouteStep } from './types.ts';

export interface AdmissionOptions {
  fleet: FleetView;
  kv: KvEstimator;
  /** The GPU-time model the Router feeds: admission asks it about the replica the policy picked. */
  gpu: GpuTimeModel;
  router: RouteStep;
  clock: Clock;
  cfg: AdmissionConfig;
  connectionsPerReplica: number;
  /** The registry's scrape interval: how often a non-empty queue looks at the fleet again. */
  pollMs: number;
  metrics?: AdmissionMetrics | null;
  /**
   * A `done` callback threw. Callbacks may run from a queue timer, where a throw would end the process: the
   * controller reports it here and carries on with the next request. Default: rethrown on a later turn.
   */
  onCallbackError?: (err: unknown) => void;
}

export class AdmissionController {
  private readonly deps: AdmissionDeps;
  private readonly pools = new Map<string, PoolAdmission>();

  constructor(o: AdmissionOptions) {
    this.deps = {
      fleet: o.fleet,
      budget: new PoolBudgetReader(o.fleet, o.kv),
      gpu: o.gpu,
      clock: o.clock,
      metrics: o.metrics ?? null,
      cfg: o.cfg,
      router: o.router,
      connectionsPerReplica: o.connectionsPerReplica,
      pollMs: o.pollMs,
      onCallbackError: o.onCallbackError ?? ((err) => queueMicrotask(() => {
        throw err;
      })),
    };
  }

  /**
   * Admits, queues or refuses `req`; `done` is called exactly once, synchronously from here when decided at
   * once, else later. On 'admitted' the caller records its dispatch (ledger.dispatch) before `done` returns,
   * and calls released() when that attempt ends.
   */
  acquire(req: AdmissionRequest, done: AdmissionDone): AdmissionTicket {
    return this.pool(req.route.poolId).acquire(req, done);
  }

  /** The client went away: a queued request leaves the queue now ('cancelled'); an admitted one is unaffected. */
  cancel(t: AdmissionTicket): void {
    this.pools.get(t.req.route.poolId)?.cancel(t);
  }

  /** An admitted request's attempt ended on `poolId`, giving back `tokens` (its reservation): pump that pool. */
  released(poolId: string, tokens: number): void {
    this.pool(poolId).released(tokens);
  }

  reconfigure(o: { cfg: AdmissionConfig; router: RouteStep; connectionsPerReplica: number; pollMs: number }): void {
    const d = this.deps;
    d.cfg = o.cfg;
    d.router = o.router;
    d.connectionsPerReplica = o.connectionsPerReplica;
    d.pollMs = o.pollMs;
    for (const p of this.pools.values()) p.pump();
  }

  /** Requests waiting per pool (the queue-depth gauge). */
  *queueDepths(): Iterable<[pool: string, depth: number]> {
    for (const [id, p] of this.pools) yield [id, p.queueDepth];
  }

  /** The pool's controller (for the simulator's and tests' inspection). */
  pool(poolId: string): PoolAdmission {
    let p = this.pools.get(poolId);
    if (p === undefined) {
      p = new PoolAdmission(poolId, this.deps);
      this.pools.set(poolId, p);
    }
    return p;
  }
}
