// `--admission native`: each routed system under the admission it has by default upstream.
//   round-robin, least-outstanding-tokens: none (plain load balancers);
//   sglang: none (sgl-model-gateway's limiter is off by default: --max-concurrent-requests -1);
//   llm-d, llm-d-precise: the legacy admission controller (flow control is off by default), which sheds only
//     sheddable requests while the utilization detector reads the pool as saturated;
//   dynamo: its router queue (requests wait while every worker's active prefill tokens exceed 16 ×
//     max_num_batched_tokens), no rejection (busy thresholds unset);
//   kv-aware: Expediter's own admission is its native one (null here: the gateway's AdmissionController).
// Any other policy (the simulator's own floors) gets none.
// Thread: the run's. Setup only.
import type { RouteStep } from '../../../src/admission/types.ts';
import { DynamoPolicy } from '../../../src/router/policies/dynamo.ts';
import type { FleetView, RoutingPolicy } from '../../../src/router/types.ts';
import type { Clock } from '../../../src/util/clock.ts';
import { PROFILES } from '../../../test/mock-replica/engine/profiles.ts';
import type { ProfileName } from '../../../test/mock-replica/engine/types.ts';
import { AdmitAll } from './admit-all.ts';
import { DynamoRouterQueue } from './dynamo-queue.ts';
import { LlmdLegacyAdmission } from './llm-d-legacy.ts';
import type { NativeAdmission } from './types.ts';

export interface NativeAdmissionDeps {
  fleet: FleetView;
  router: RouteStep;
  clock: Clock;
  /** The engine profile of the pool's replicas (for the max_num_batched_tokens they publish). */
  profile: ProfileName;
}

/** The routed system's own admission; null when that is Expediter's (kv-aware). */
export function nativeAdmission(policy: RoutingPolicy, d: NativeAdmissionDeps): NativeAdmission | null {
  switch (policy.name) {
    case 'kv-aware':
      return null;
    case 'llm-d':
    case 'llm-d-precise':
      return new LlmdLegacyAdmission(d.fleet, d.router);
    case 'dynamo':
      if (!(policy instanceof DynamoPolicy)) throw new TypeError('dynamo native admission needs the dynamo policy\'s load accounting');
      return new DynamoRouterQueue({ fleet: d.fleet, router: d.router, clock: d.clock, load: policy, maxNumBatchedTokens: PROFILES[d.profile].maxNumBatchedTokens });
    case 'sglang':
      return new AdmitAll(d.router, 'none: sgl-model-gateway defaults (--max-concurrent-requests -1 turns its limiter and queue off)');
    default:
      return new AdmitAll(d.router);
  }
}
