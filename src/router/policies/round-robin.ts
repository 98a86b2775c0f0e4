// round-robin: each pool keeps a cursor and hands requests to its eligible replicas in turn. Treats a
// 30-token and a 32,000-token request as one unit of work: kept as the baseline every routing figure is
// compared against. Thread: main. Hot path: O(eligible) with no allocation.
import type { RankedPolicy } from '../ranking.ts';
import type { Decision, FleetView, RouteRequest, RoutingPolicy } from '../types.ts';

export class RoundRobinPolicy implements RoutingPolicy, RankedPolicy {
  readonly name = 'round-robin';
  private readonly cursors = new Map<string, number>();
  /** The last pick's candidates and where in them it was (its ranking: the rotation from there). */
  private last: readonly number[] = [];
  private lastAt = 0;

  pick(req: RouteRequest, eligible: readonly number[], _fleet: FleetView, out: Decision): number {
    if (eligible.length === 0) return -1;
    const c = this.cursors.get(req.poolId) ?? 0;
    this.cursors.set(req.poolId, (c + 1) % 1_000_000_007);
    this.last = eligible;
    this.lastAt = c % eligible.length;
    out.slot = eligible[this.lastAt]!;
    return out.slot;
  }

  /** The rotation from the last pick on: the replicas its next picks would have taken. */
  ranking(slots: Int32Array, matched: Int32Array): number {
    const n = this.last.length;
    for (let k = 0; k < n; k++) {
      slots[k] = this.last[(this.lastAt + k) % n]!;
      matched[k] = 0;
    }
    return n;
  }

  describe(): string {
    return '';
  }
}
