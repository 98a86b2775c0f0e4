// The router's contracts: what it reads about the fleet, what a policy is, what a decision carries.
// Thread: main. The router does no I/O and has no await: a decision is a pure function of these reads.
import type { InflightLedger } from '../registry/inflight-ledger.ts';

/** The read side of the replica registry that routing needs (ReplicaRegistry implements it). */
export interface FleetView {
  candidates(poolId: string): readonly number[];
  isHealthy(slot: number): boolean;
  replica(slot: number): { readonly id: string; readonly draining: boolean; readonly adapters: readonly string[] | null };
  residentAdapters(slot: number): readonly string[];
  readonly ledger: InflightLedger;
}

export interface RouteRequest {
  poolId: string;
  adapter: string | null;
  promptTokens: number;
  maxTokens: number;
  blockHashes: Float64Array;
  /** Slots already tried by earlier attempts of this request. */
  excluded: readonly number[];
}

/** A routing policy picks one slot among eligible candidates (already filtered), or -1. */
export interface RoutingPolicy {
  readonly name: string;
  pick(req: RouteRequest, eligible: readonly number[], fleet: FleetView): number;
  /** `; key=value` figures of the last pick for the x-gateway-route header. */
  describe(slot: number, req: RouteRequest, fleet: FleetView): string;
}
