// llm-d's native admission with its defaults: the flowControl feature gate is off by default, so the EPP
// uses its LegacyAdmissionController (llm-d/llm-d-router pkg/epp/requestcontrol/admission.go; gate:
// pkg/epp/flowcontrol/README.md): a sheddable request (priority < 0) is rejected with 429 ("system
// saturated, sheddable request dropped") when the saturation detector says the pool is saturated (≥ 1.0);
// every other request is admitted and scheduled at once, whatever the load. Nothing is queued in the
// gateway: excess requests wait in the model servers' own queues.
// Priority: llm-d reads it from the request's InferenceObjective (default 0). Here the tenant's SLA tier
// stands for it: `batch` is sheddable (−1), `standard` and `premium` are not.
// Thread: the run's. Hot path: one detector pass for a sheddable request, one route per admitted request.
import type { AdmissionDone, AdmissionRequest, RouteStep, SlaTier } from '../../../src/admission/types.ts';
import type { FleetView } from '../../../src/router/types.ts';
import { UtilizationDetector } from './llm-d-saturation.ts';
import type { NativeAdmission } from './types.ts';

/** The llm-d priority a tenant of this tier would carry in its InferenceObjective. */
export function llmdPriority(tier: SlaTier): number {
  return tier === 'batch' ? -1 : tier === 'premium' ? 1 : 0;
}

export class LlmdLegacyAdmission implements NativeAdmission {
  readonly description = 'llm-d legacy admission (flow control off): sheddable (batch-tier) requests rejected with 429 while the utilization detector reads saturation >= 1 (queue 5, KV 0.8, stale 200 ms); every other request routed on arrival';
  readonly detector: UtilizationDetector;
  private readonly router: RouteStep;
  /** Sheddable requests rejected (for tests and the run's notes). */
  rejected = 0;

  get interventions(): number {
    return this.rejected;
  }

  constructor(fleet: FleetView, router: RouteStep) {
    this.detector = new UtilizationDetector(fleet);
    this.router = router;
  }

  acquire(req: AdmissionRequest, done: AdmissionDone): void {
    if (llmdPriority(req.tier) < 0 && this.detector.saturation(req.route.poolId) >= 1) {
      this.rejected++;
      done({
        kind: 'rejected', shed: 'queue_full', queuedMs: 0,
        rejection: { code: 'server_overloaded', retryAfterSeconds: 1, message: 'system saturated, sheddable request dropped' },
      });
      return;
    }
    const r = this.router.route(req.route);
    if (r.ok) done({ kind: 'admitted', slot: r.slot, replicaId: r.replicaId, decision: r.decision, queuedMs: 0 });
    else done({ kind: 'unroutable', reason: r.reason, queuedMs: 0 });
  }

  released(_poolId: string, _tokens: number): void {}
}
