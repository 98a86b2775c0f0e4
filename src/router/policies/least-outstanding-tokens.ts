// least-outstanding-tokens: picks the replica with the fewest tokens of work the gateway itself has in flight
// there (prompt tokens not yet prefilled + output tokens not yet generated, from the in-flight ledger, which
// changes synchronously at dispatch and so cannot be stampeded by a burst the way scraped metrics can). Ties
// go to fewer requests in flight, then rotate. A baseline: it ignores prefix-cache overlap and KV pressure.
// Thread: main. Hot path: O(eligible) Atomics.load reads, no allocation.
import { LEDGER_INFLIGHT, LEDGER_OUTSTANDING_TOKENS } from '../../registry/inflight-ledger.ts';
import type { Decision, FleetView, RouteRequest, RoutingPolicy } from '../types.ts';

export class LeastOutstandingTokensPolicy implements RoutingPolicy {
  readonly name = 'least-outstanding-tokens';
  private rotate = 0;

  pick(_req: RouteRequest, eligible: readonly number[], fleet: FleetView, out: Decision): number {
    const n = eligible.length;
    if (n === 0) return -1;
    const ledger = fleet.ledger;
    const start = this.rotate++ % n;
    let best = -1;
    let bestTokens = Infinity;
    let bestInflight = Infinity;
    for (let k = 0; k < n; k++) {
      const slot = eligible[(start + k) % n]!;
      const tokens = ledger.get(slot, LEDGER_OUTSTANDING_TOKENS);
      const inflight = ledger.get(slot, LEDGER_INFLIGHT);
      if (tokens < bestTokens || (tokens === bestTokens && inflight < bestInflight)) {
        best = slot;
        bestTokens = tokens;
        bestInflight = inflight;
      }
    }
    if (this.rotate > 1_000_000_007) this.rotate = 0;
    out.slot = best;
    return best;
  }

  describe(slot: number, _req: RouteRequest, fleet: FleetView): string {
    return `; outstanding_tokens=${fleet.ledger.get(slot, LEDGER_OUTSTANDING_TOKENS)}; inflight=${fleet.ledger.get(slot, LEDGER_INFLIGHT)}`;
  }
}
