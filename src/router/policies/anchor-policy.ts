// What the comparison policies (llm-d, sglang, dynamo) share: an approximate prefix index written at dispatch
// (speculative insertion, as those routers do) and purged for a replica that restarted or left, and the
// per-decision candidate table their scorers fill. They get none of kv-aware's corrections (reported cached
// tokens, reply blocks, headroom): that difference is what the fleet simulator measures.
// Thread: the acceptor. Hot path: pick() in each subclass; insert at dispatch is one index write per block.
import { CandidateTable } from '../candidate-table.ts';
import { matchPrefix } from '../prefix-match.ts';
import type { PrefixIndex } from '../prefix-index.ts';
import type { Decision, FleetView, RouteRequest, RoutingFeedback, RoutingPolicy } from '../types.ts';

export abstract class AnchorPolicy implements RoutingPolicy, RoutingFeedback {
  abstract readonly name: string;
  protected readonly index: PrefixIndex;
  protected readonly table: CandidateTable;

  constructor(index: PrefixIndex, slots: number) {
    this.index = index;
    this.table = new CandidateTable(slots);
  }

  abstract pick(req: RouteRequest, eligible: readonly number[], fleet: FleetView, out: Decision): number;

  /** Starts a decision: the candidates in this.table, each one's matched prefix blocks filled in; the longest. */
  protected matchAll(req: RouteRequest, eligible: readonly number[], fleet: FleetView): number {
    this.table.begin(eligible);
    return matchPrefix(this.index, req, eligible, fleet, this.table);
  }

  describe(_slot: number, _req: RouteRequest, _fleet: FleetView): string {
    return '';
  }

  dispatched(slot: number, req: RouteRequest): void {
    if (req.blockHashes.length > 0) this.index.insert(req.blockHashes, 0, slot);
  }

  replicaReset(slot: number): void {
    this.index.purgeSlot(slot);
  }
}
