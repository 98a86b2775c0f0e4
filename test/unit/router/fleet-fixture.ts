// A FleetView for router unit tests: one pool of replicas with settable scraped rows, health and resident
// adapters over a real InflightLedger, and a settable clock. Rows start fresh and empty.
import { InflightLedger } from '../../../src/registry/inflight-ledger.ts';
import type { ReplicaRow } from '../../../src/registry/replica-table.ts';
import { configSchema, type GatewayConfig } from '../../../src/config/schema.ts';
import type { FleetView, RouteRequest } from '../../../src/router/types.ts';
import { syntheticBlockHash } from '../../helpers/synthetic-hashes.ts';

export interface RowSpec {
  kvUsage: number; numGpuBlocks: number; running: number; waiting: number; lastGoodScrapeMs: number;
  /** vllm:prefix_cache_queries_total / _hits_total (tokens); 0 = not reported. */
  prefixQueriesTotal?: number; prefixHitsTotal?: number;
}

export class FixtureFleet implements FleetView {
  readonly ledger: InflightLedger;
  ids: string[];
  readonly rows: RowSpec[];
  readonly resident: string[][];
  readonly affinityOff = new Set<number>();
  members: number[];
  now = 100_000;

  constructor(ids: string[], slots = ids.length) {
    this.ids = ids;
    this.ledger = new InflightLedger(slots);
    this.members = ids.map((_, i) => i);
    this.rows = Array.from({ length: slots }, () => ({ kvUsage: 0, numGpuBlocks: 10_000, running: 0, waiting: 0, lastGoodScrapeMs: 99_990 }));
    this.resident = Array.from({ length: slots }, () => []);
  }

  candidates(): readonly number[] { return this.members; }
  isHealthy(): boolean { return true; }
  replica(slot: number): { id: string; draining: boolean; adapters: null } { return { id: this.ids[slot]!, draining: false, adapters: null }; }
  residentAdapters(slot: number): readonly string[] { return this.resident[slot]!; }
  readRow(slot: number, out: ReplicaRow): boolean {
    const r = this.rows[slot]!;
    out.clearData();
    out.lastGoodScrapeMs = r.lastGoodScrapeMs;
    out.kvUsage = r.kvUsage;
    out.numGpuBlocks = r.numGpuBlocks;
    out.blockSize = 16;
    out.running = r.running;
    out.waiting = r.waiting;
    out.prefixQueriesTotal = r.prefixQueriesTotal ?? 0;
    out.prefixHitsTotal = r.prefixHitsTotal ?? 0;
    return true;
  }
  prefixAffinityOff(slot: number): boolean { return this.affinityOff.has(slot); }
  nowMs(): number { return this.now; }
}

/** A gateway config with one 8B pool of the given replica ids and routing overrides. */
export function fixtureConfig(ids: string[], routing: Record<string, unknown> = {}, engine: Record<string, unknown> = {}): GatewayConfig {
  return configSchema.parse({
    routing: { prefix_index_entries: 1 << 16, ...routing },
    pools: [{ id: '8b', model: 'llama', engine, replicas: ids.map((id) => ({ id, url: 'http://127.0.0.1:1' })) }],
  });
}

/** A chain of `blocks` uniform 53-bit block hashes: the first `shared` from seed `a`, the rest from seed `b`. */
export function hashes(blocks: number, a: number, shared = blocks, b = a + 1_000_003): Float64Array {
  const out = new Float64Array(blocks);
  for (let i = 0; i < blocks; i++) out[i] = syntheticBlockHash(i < shared ? a : b, i);
  return out;
}

export function request(blockHashes: Float64Array, over: Partial<RouteRequest> = {}): RouteRequest {
  return { poolId: '8b', adapter: null, promptTokens: blockHashes.length * 16 + 8, maxTokens: 100, blockHashes, excluded: [], ...over };
}
