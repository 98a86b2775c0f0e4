// `random`: a replica drawn uniformly from the eligible ones, blind to load and cache. A simulator-only
// policy (not in the gateway's config schema): the floor a comparison must rank every real policy above,
// which is how the race's harness shows it can tell policies apart (test/integration/sim/race-power.test.ts).
// Thread: the run's. Hot path: one draw per request.
import { SeededRandom } from '../../src/router/seeded-random.ts';
import type { Decision, FleetView, RouteRequest, RoutingPolicy } from '../../src/router/types.ts';

export class RandomPolicy implements RoutingPolicy {
  readonly name = 'random';
  private readonly rng: SeededRandom;

  constructor(seed: number) {
    this.rng = new SeededRandom(seed);
  }

  pick(_req: RouteRequest, eligible: readonly number[], _fleet: FleetView, out: Decision): number {
    if (eligible.length === 0) return -1;
    out.slot = eligible[Math.floor(this.rng.next() * eligible.length)]!;
    return out.slot;
  }

  describe(): string {
    return '';
  }
}
