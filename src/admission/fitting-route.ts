// Which replica of a pool can take a request now, for admission: the router's choice, re-asked without the
// replicas that cannot take it (this gateway's connection cap there, or its own KV room); a replica that is
// idle (work conservation: admission never refuses one); and, for a request that must wait, when the
// earliest replica it could go to will be idle as the GPU-time model predicts it.
// Thread: the acceptor. Hot path: routeFitting is one route() when the first choice can take the request;
// the rest runs only for requests that do not fit at once (one KvEstimator read per member, and for the idle
// horizon one prediction per member).
import { LEDGER_INFLIGHT } from '../registry/inflight-ledger.ts';
import type { RouteResult } from '../router/route.ts';
import type { RouteRequest } from '../router/types.ts';
import { GpuPrediction } from '../gpu-time/gpu-time-model.ts';
import type { AdmissionDeps, AdmissionRequest } from './types.ts';
import { needOf } from './request-figures.ts';

export type Routed = RouteResult & { ok: true };
/** `best`: the policy's least bad choice when it said none fits (kv-aware), for the wait estimate. */
export type Fit = Routed | { ok: false; reason: 'no_healthy_replica' | 'all_tried' | 'full'; best?: Routed };
const FULL: Fit = { ok: false, reason: 'full' };

export class FittingRoute {
  private readonly deps: AdmissionDeps;
  private readonly excluded: number[] = [];
  private readonly scratch = new GpuPrediction();

  constructor(deps: AdmissionDeps) {
    this.deps = deps;
  }

  /**
   * The router's choice, re-asked without replicas at their connection cap (this gateway's in-flight
   * requests there, from the ledger): past the cap a request would wait for a socket inside the upstream
   * client with no byte sent, the silent queue admission exists to replace. 'full' when every healthy,
   * untried replica is at its cap, or the policy says its choice does not fit (decision.fits).
   */
  routeFitting(a: AdmissionRequest): Fit {
    const deps = this.deps;
    const req = a.route;
    let r = deps.router.route(req);
    if (!r.ok) return r;
    if (!this.takes(r.slot, a, r.decision.cachedBlocks)) {
      const excl = this.excluded;
      excl.length = 0;
      for (let i = 0; i < req.excluded.length; i++) excl.push(req.excluded[i]!);
      // One object per re-route, only when the first choice cannot take the request.
      const again: RouteRequest = { ...req, excluded: excl };
      do {
        excl.push(r.slot);
        r = deps.router.route(again);
      } while (r.ok && !this.takes(r.slot, a, r.decision.cachedBlocks));
      excl.length = 0;
      if (!r.ok) return r.reason === 'no_healthy_replica' ? r : FULL;
      // The route header and the why-metric say the policy's first choice was passed over for room, not
      // that the replica finally chosen was picked for its own sake (it may look "cold" to the policy).
      r.decision.why = 'headroom';
    }
    return r.decision.fits ? r : { ok: false, reason: 'full', best: r };
  }

  /**
   * An idle member that can serve the request (budget.idle: nothing running or waiting there by the table
   * and the ledger, its free KV holds the request whole, not draining), as the router picks among the idle
   * ones (adapters, tried replicas and stalls still apply); null when there is none. The policy's fit is not
   * asked: on an idle replica the request harms no one, and no replica would serve it sooner.
   */
  routeIdle(a: AdmissionRequest): Routed | null {
    const deps = this.deps;
    const req = a.route;
    const members = deps.fleet.candidates(req.poolId);
    const need = needOf(a, 0);
    const excl = this.excluded;
    excl.length = 0;
    let idle = 0;
    for (let i = 0; i < members.length; i++) {
      const slot = members[i]!;
      if (deps.budget.idle(slot, need)) idle++;
      else excl.push(slot);
    }
    if (idle === 0) {
      excl.length = 0;
      return null;
    }
    for (let i = 0; i < req.excluded.length; i++) excl.push(req.excluded[i]!);
    const r = deps.router.route({ ...req, excluded: excl });
    excl.length = 0;
    if (!r.ok) return null;
    r.decision.why = 'headroom';
    return r;
  }

  /** Whether any member of the pool is idle (budget.idle for the smallest request): the pump's cue to try them. */
  anyIdle(poolId: string): boolean {
    const deps = this.deps;
    const members = deps.fleet.candidates(poolId);
    for (let i = 0; i < members.length; i++) if (deps.budget.idle(members[i]!, 0)) return true;
    return false;
  }

  /**
   * Ms until the first member that could serve the request goes idle, as the model predicts its streams end
   * (GpuPrediction.idleMs) with no new work sent: admission never refuses an idle replica, so a request that
   * comes back then is admitted. Only members whose row is fresh and shows nothing but this gateway's
   * requests count (another gateway's streams cannot be foreseen); Infinity when none does.
   */
  idleHorizonMs(a: AdmissionRequest): number {
    const deps = this.deps;
    const req = a.route;
    const members = deps.fleet.candidates(req.poolId);
    const need = needOf(a, 0);
    let best = Number.POSITIVE_INFINITY;
    for (let i = 0; i < members.length; i++) {
      const slot = members[i]!;
      const info = deps.fleet.replica(slot);
      if (!deps.fleet.isHealthy(slot) || info.draining || deps.budget.wholeTokens(slot) < need) continue;
      if (req.adapter !== null && info.adapters !== null && !info.adapters.includes(req.adapter)) continue;
      const p = deps.gpu.predict(req, slot, 0, this.scratch);
      if (p.idleKnown && p.idleMs < best) best = p.idleMs;
    }
    return best;
  }

  /**
   * The replica can take the request now: fewer than connections_per_replica of this gateway's requests in
   * flight there, and (when its row is fresh) room for the request beyond its headroom. The KV part repeats
   * what the kv-aware policy checks itself, for the policies that do not look at KV at all.
   */
  private takes(slot: number, a: AdmissionRequest, cachedBlocks: number): boolean {
    const deps = this.deps;
    if (deps.fleet.ledger.get(slot, LEDGER_INFLIGHT) >= deps.connectionsPerReplica) return false;
    return !(deps.budget.replicaRoom(slot, deps.cfg.headroom_ratio) < needOf(a, cachedBlocks));
  }
}
