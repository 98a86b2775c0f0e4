// round-robin: each pool keeps a cursor and hands requests to its eligible replicas in turn. Treats a
// 30-token and a 32,000-token request as one unit of work: kept as the baseline every routing figure is
// compared against. Thread: main. Hot path: O(eligible) with no allocation.
import type { Decision, FleetView, RouteRequest, RoutingPolicy } from '../types.ts';

export class RoundRobinPolicy implements RoutingPolicy {
  readonly name = 'round-robin';
  private readonly cursors = new Map<string, number>();

  pick(req: RouteRequest, eligible: readonly number[], _fleet: FleetView, out: Decision): number {
    if (eligible.length === 0) return -1;
    const c = this.cursors.get(req.poolId) ?? 0;
    this.cursors.set(req.poolId, (c + 1) % 1_000_000_007);
    out.slot = eligible[c % eligible.length]!;
    return out.slot;
  }

  describe(): string {
    return '';
  }
}
