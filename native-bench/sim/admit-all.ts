// Native admission of the systems that have none (round robin and least-outstanding-tokens as a plain load
// balancer runs them): every request is routed the moment it arrives and sent to its replica, whose engine
// queue is the only queue. Same calls as the AdmissionController the simulator otherwise drives.
// Thread: the run's. Hot path: one route per request, no allocation beyond the outcome object.
import type { AdmissionDone, AdmissionRequest, RouteStep } from '../../src/admission/types.ts';

export class AdmitAll {
  private readonly router: RouteStep;

  constructor(router: RouteStep) {
    this.router = router;
  }

  acquire(req: AdmissionRequest, done: AdmissionDone): null {
    const r = this.router.route(req.route);
    if (r.ok) done({ kind: 'admitted', slot: r.slot, replicaId: r.replicaId, decision: r.decision, queuedMs: 0 });
    else done({ kind: 'unroutable', reason: r.reason, queuedMs: 0 });
    return null;
  }

  /** Nothing is reserved, so nothing is given back. */
  released(_poolId: string, _tokens: number): void {}
}
