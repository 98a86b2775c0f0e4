// `random`: a replica drawn uniformly from the eligible ones, blind to load and cache. A simulator-only
// policy (not in the gateway's config schema): the floor a comparison must rank every real policy above,
// which is how the race's harness shows it can tell policies apart (test/integration/sim/race-power.test.ts).
// Thread: the run's. Hot path: one draw per request.
import { SeededRandom } from '../../src/router/seeded-random.ts';
import type { RankedPolicy } from '../../src/router/ranking.ts';
import type { Decision, FleetView, RouteRequest, RoutingPolicy } from '../../src/router/types.ts';

export class RandomPolicy implements RoutingPolicy, RankedPolicy {
  readonly name = 'random';
  private readonly rng: SeededRandom;
  private last: readonly number[] = [];
  private lastAt = 0;

  constructor(seed: number) {
    this.rng = new SeededRandom(seed);
  }

  pick(_req: RouteRequest, eligible: readonly number[], _fleet: FleetView, out: Decision): number {
    if (eligible.length === 0) return -1;
    this.last = eligible;
    this.lastAt = Math.floor(this.rng.next() * eligible.length);
    out.slot = eligible[this.lastAt]!;
    return out.slot;
  }

  /** Its draw first, then the others from a second draw on, in turn: as blind as the pick. */
  ranking(slots: Int32Array, matched: Int32Array): number {
    const n = this.last.length;
    slots[0] = this.last[this.lastAt]!;
    matched[0] = 0;
    const from = Math.floor(this.rng.next() * n);
    let k = 1;
    for (let i = 0; i < n; i++) {
      const at = (from + i) % n;
      if (at === this.lastAt) continue;
      slots[k] = this.last[at]!;
      matched[k++] = 0;
    }
    return n;
  }

  describe(): string {
    return '';
  }
}
