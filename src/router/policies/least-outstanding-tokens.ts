// least-outstanding-tokens: picks the replica with the fewest tokens of work the gateway itself has in flight
// there (prompt tokens not yet prefilled + output tokens not yet generated, from the in-flight ledger, which
// changes synchronously at dispatch and so cannot be stampeded by a burst the way scraped metrics can). Ties
// go to fewer requests in flight, then rotate. A baseline: it ignores prefix-cache overlap and KV pressure.
// Thread: main. Hot path: O(eligible) Atomics.load reads, no allocation.
import { LEDGER_INFLIGHT, LEDGER_OUTSTANDING_TOKENS } from '../../registry/inflight-ledger.ts';
import type { RankedPolicy } from '../ranking.ts';
import type { Decision, FleetView, RouteRequest, RoutingPolicy } from '../types.ts';

export class LeastOutstandingTokensPolicy implements RoutingPolicy, RankedPolicy {
  readonly name = 'least-outstanding-tokens';
  private rotate = 0;
  /** The last pick's candidates in its scan order, their (tokens, in flight), and its choice (ranking()). */
  private readonly order: number[] = [];
  private readonly keys: number[] = [];
  private chosen = -1;

  pick(_req: RouteRequest, eligible: readonly number[], fleet: FleetView, out: Decision): number {
    const n = eligible.length;
    if (n === 0) return -1;
    const ledger = fleet.ledger;
    const start = this.rotate++ % n;
    let best = -1;
    let bestTokens = Infinity;
    let bestInflight = Infinity;
    const order = this.order;
    const keys = this.keys;
    for (let k = 0; k < n; k++) {
      const slot = eligible[(start + k) % n]!;
      const tokens = ledger.get(slot, LEDGER_OUTSTANDING_TOKENS);
      const inflight = ledger.get(slot, LEDGER_INFLIGHT);
      order[k] = slot;
      // Tokens first, in-flight requests to break ties (≤ 2^20 of them on one replica).
      keys[k] = tokens * 1_048_576 + inflight;
      if (tokens < bestTokens || (tokens === bestTokens && inflight < bestInflight)) {
        best = slot;
        bestTokens = tokens;
        bestInflight = inflight;
      }
    }
    if (this.rotate > 1_000_000_007) this.rotate = 0;
    order.length = n;
    keys.length = n;
    this.chosen = best;
    out.slot = best;
    return best;
  }

  /** The last pick's candidates by outstanding tokens, then in-flight requests, then its scan order. */
  ranking(slots: Int32Array, matched: Int32Array): number {
    const n = this.order.length;
    const pos = Array.from({ length: n }, (_, k) => k);
    const chosen = this.order.indexOf(this.chosen);
    pos.sort((a, b) => (a === chosen ? -1 : b === chosen ? 1 : this.keys[a]! - this.keys[b]! || a - b));
    for (let k = 0; k < n; k++) {
      slots[k] = this.order[pos[k]!]!;
      matched[k] = 0;
    }
    return n;
  }

  describe(slot: number, _req: RouteRequest, fleet: FleetView): string {
    return `; outstanding_tokens=${fleet.ledger.get(slot, LEDGER_OUTSTANDING_TOKENS)}; inflight=${fleet.ledger.get(slot, LEDGER_INFLIGHT)}`;
  }
}
