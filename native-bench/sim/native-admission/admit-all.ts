// No admission at all: every request is routed the moment it arrives and sent to its replica, whose engine
// queue is the only queue. The native admission of round robin and least-outstanding-tokens (plain load
// balancers) and of SGLang's router with its defaults (sgl-model-gateway: --max-concurrent-requests -1
// turns its token-bucket limiter and queue off; no --rate-limit-tokens-per-second).
// Thread: the run's. Hot path: one route per request.
import type { AdmissionDone, AdmissionRequest, RouteStep } from '../../../src/admission/types.ts';
import type { NativeAdmission } from './types.ts';

/** AdmitAll's description unless its caller names the system whose default it stands for. */
export const ADMIT_ALL_DESCRIPTION = 'none: every request routed on arrival';

export class AdmitAll implements NativeAdmission {
  readonly description: string;
  readonly interventions = 0;
  private readonly router: RouteStep;

  constructor(router: RouteStep, description = ADMIT_ALL_DESCRIPTION) {
    this.router = router;
    this.description = description;
  }

  acquire(req: AdmissionRequest, done: AdmissionDone): void {
    const r = this.router.route(req.route);
    if (r.ok) done({ kind: 'admitted', slot: r.slot, replicaId: r.replicaId, decision: r.decision, queuedMs: 0 });
    else done({ kind: 'unroutable', reason: r.reason, queuedMs: 0 });
  }

  /** Nothing is reserved, so nothing is given back. */
  released(_poolId: string, _tokens: number): void {}
}
