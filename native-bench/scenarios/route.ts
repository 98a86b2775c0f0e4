// route scenario: what does one routing decision cost, per policy, for 64 replicas in process?
// The fleet is a real ReplicaTable (seqlocked rows, as the poller writes them) and InflightLedger; the prefix
// index holds 64 hot system prompts of 1,500 blocks spread over 1-3 replicas each plus a background of
// other prefixes, so lookups walk real buckets. Requests: the design's chat request (1,800 tokens = 112 full
// blocks, 100 of them a hot prefix) and a 32,000-token prompt (2,000 blocks, 1,500 of them a hot prefix).
// A decision = Router.route (filters + policy.pick, index lookup included); dispatch (the index insert) is
// timed separately. Each decision is timed alone (hrtime around one call); p50/p99 over --decisions.
// Allocation: GC scavenges per 10,000 decisions, for both sizes (allocation per block would show as ~18× more).
// Thread: bench main thread.
import { PerformanceObserver } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import type { BenchScenario } from '../types.ts';
import { configSchema, type GatewayConfig } from '../../src/config/schema.ts';
import { InflightLedger } from '../../src/registry/inflight-ledger.ts';
import { ReplicaRow, ReplicaTable, ReplicaTableWriter } from '../../src/registry/replica-table.ts';
import { ROW_STATE } from '../../src/registry/replica-table-layout.ts';
import { PREFIX_INDEX_BYTES_PER_ENTRY, PrefixIndex } from '../../src/router/prefix-index.ts';
import { AnchorPolicy } from '../../src/router/policies/anchor-policy.ts';
import { Router, createPolicy } from '../../src/router/route.ts';
import type { FleetView, RouteRequest } from '../../src/router/types.ts';
import { syntheticBlockHash } from '../../test/helpers/synthetic-hashes.ts';

const REPLICAS = 64;

class BenchFleet implements FleetView {
  readonly ledger = new InflightLedger(REPLICAS);
  readonly table: ReplicaTable;
  private readonly members = Array.from({ length: REPLICAS }, (_, i) => i);
  private readonly infos = this.members.map((i) => ({ id: `8b-${i + 1}`, draining: false, adapters: null }));
  constructor(table: ReplicaTable) {
    this.table = table;
  }
  candidates(): readonly number[] { return this.members; }
  isHealthy(slot: number): boolean { return this.table.state(slot) === ROW_STATE.UP; }
  replica(slot: number): { id: string; draining: boolean; adapters: null } { return this.infos[slot]!; }
  residentAdapters(): readonly string[] { return []; }
  readRow(slot: number, out: ReplicaRow): boolean { return this.table.read(slot, out); }
  prefixAffinityOff(): boolean { return false; }
  nowMs(): number { return Date.now(); }
}

/** Uniform 53-bit values, as xxhash64's low 53 bits are. */
function chain(seed: number, blocks: number, out = new Float64Array(blocks), from = 0): Float64Array {
  for (let b = from; b < from + blocks; b++) out[b] = syntheticBlockHash(seed, b);
  return out;
}

function percentile(sorted: Float64Array, p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;
}

const scenario: BenchScenario = async (args) => {
  const { values } = parseArgs({ args, options: { decisions: { type: 'string', default: '20000' } } });
  const decisions = Number(values.decisions);
  const writer = new ReplicaTableWriter(REPLICAS);
  const row = new ReplicaRow();
  let seed = 7;
  const rnd = (): number => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32);
  for (let s = 0; s < REPLICAS; s++) {
    row.assignId = s + 1;
    row.state = ROW_STATE.UP;
    row.lastGoodScrapeMs = Date.now() + 3_600_000; // fresh for the whole run
    row.kvUsage = 0.2 + 0.4 * rnd();
    row.numGpuBlocks = 27_648;
    row.blockSize = 16;
    row.running = Math.floor(rnd() * 64);
    row.waiting = Math.floor(rnd() * 4);
    writer.write(s, row);
  }
  const fleet = new BenchFleet(new ReplicaTable(writer.buffer));
  for (let s = 0; s < REPLICAS; s++) {
    for (let k = 0; k < 8; k++) fleet.ledger.dispatch(s, 1000 + Math.floor(rnd() * 3000), 256, 16, 200);
  }
  const entries = 1 << 20;
  const index = new PrefixIndex({ entries, slots: REPLICAS });
  const HOT = 64;
  const hot = Array.from({ length: HOT }, (_, i) => chain(1_000 + i, 1500));
  // The same placements go into kv-aware's shared index and into each anchor's own index.
  const placements: Array<[Float64Array, number]> = [];
  for (let i = 0; i < 2000; i++) placements.push([chain(50_000 + i, 100), i % REPLICAS]); // older background
  for (let i = 0; i < HOT; i++) {
    const holders = 1 + (i % 3);
    for (let h = 0; h < holders; h++) placements.push([hot[i]!, (i * 7 + h * 13) % REPLICAS]);
  }
  for (const [h, slot] of placements) index.insert(h, 0, slot);

  const cfgFor = (policy: GatewayConfig['routing']['policy']): GatewayConfig => configSchema.parse({
    routing: { policy, prefix_index_entries: entries },
    pools: [{ id: '8b', model: 'llama', replicas: [{ id: '8b-1', url: 'http://127.0.0.1:1' }] }],
  });
  const makeRequests = (blocks: number, shared: number, promptTokens: number): RouteRequest[] => Array.from({ length: 256 }, (_, i) => {
    const h = new Float64Array(blocks);
    h.set(hot[i % HOT]!.subarray(0, shared));
    chain(900_000 + i, blocks - shared, h, shared);
    return { poolId: '8b', adapter: null, promptTokens, maxTokens: 256, blockHashes: h, excluded: [] };
  });
  const cases: Array<[string, RouteRequest[]]> = [
    ['1,800 tokens (112 blocks)', makeRequests(112, 100, 1800)],
    ['32,000 tokens (2,000 blocks)', makeRequests(2000, 1500, 32_000)],
  ];
  let scavenges = 0;
  const obs = new PerformanceObserver((list) => { scavenges += list.getEntries().length; });
  obs.observe({ entryTypes: ['gc'] });

  const rows: Array<Array<string | number>> = [];
  const extra: Record<string, unknown> = { indexBytesPerEntry: PREFIX_INDEX_BYTES_PER_ENTRY, indexBytes: index.buffer.byteLength };
  const policies: Array<GatewayConfig['routing']['policy']> = ['kv-aware', 'llm-d', 'llm-d-precise', 'sglang', 'dynamo', 'least-outstanding-tokens', 'round-robin'];
  const samples = new Float64Array(decisions);
  for (const name of policies) {
    const router = new Router(createPolicy(cfgFor(name), fleet, index), fleet);
    if (router.policy instanceof AnchorPolicy) for (const [h, slot] of placements) router.policy.index.insert(h, 0, slot);
    for (const [label, reqs] of cases) {
      for (let i = 0; i < 3000; i++) router.route(reqs[i % reqs.length]!); // warm up (JIT)
      await new Promise((r) => setImmediate(r));
      const gc0 = scavenges;
      let sink = 0;
      for (let i = 0; i < decisions; i++) {
        const req = reqs[i % reqs.length]!;
        const t0 = process.hrtime.bigint();
        const res = router.route(req);
        samples[i] = Number(process.hrtime.bigint() - t0) / 1000;
        if (res.ok) sink += res.decision.cachedBlocks;
      }
      await new Promise((r) => setImmediate(r)); // let the GC observer report
      const gcs = ((scavenges - gc0) * 10_000) / decisions;
      const sorted = samples.slice().sort();
      rows.push([name, label, percentile(sorted, 0.5).toFixed(2), percentile(sorted, 0.99).toFixed(2), gcs.toFixed(1), (sink / decisions).toFixed(0)]);
      extra[`${name} ${label}`] = { p50Us: percentile(sorted, 0.5), p99Us: percentile(sorted, 0.99), scavengesPer10k: gcs };
    }
  }
  // Dispatch: the kv-aware index insert of the prompt (blocks already held are refreshed).
  const kv = new Router(createPolicy(cfgFor('kv-aware'), fleet, index), fleet);
  for (const [label, reqs] of cases) {
    for (let i = 0; i < decisions; i++) {
      const req = reqs[i % reqs.length]!;
      const res = kv.route(req);
      if (!res.ok) continue;
      const t0 = process.hrtime.bigint();
      kv.dispatched(req, res.decision);
      samples[i] = Number(process.hrtime.bigint() - t0) / 1000;
    }
    const sorted = samples.slice().sort();
    rows.push(['kv-aware dispatch (index insert)', label, percentile(sorted, 0.5).toFixed(2), percentile(sorted, 0.99).toFixed(2), '', '']);
  }
  obs.disconnect();
  return {
    title: `One routing decision, ${REPLICAS} replicas in process: time per decision (µs) and GC scavenges per 10k decisions`,
    columns: ['policy', 'prompt', 'p50 µs', 'p99 µs', 'scavenges / 10k', 'mean cached blocks'],
    rows,
    notes: [
      `prefix index: ${entries.toLocaleString('en-US')} entries, ${PREFIX_INDEX_BYTES_PER_ENTRY} bytes per entry, ${(index.buffer.byteLength / 2 ** 20).toFixed(1)} MiB`,
      'decision = Router.route (filters + policy.pick including the index lookup); each timed alone with hrtime',
      'a per-decision allocation (Decision + result object) is constant; per-block allocation would multiply the 2,000-block scavenges',
    ],
    extra,
  };
};

export default scenario;
