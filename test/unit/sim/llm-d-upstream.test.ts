// llm-d as upstream runs it, where the simulator used to differ: each pod's metrics refreshed on its own
// ticker (llm-d-inference-scheduler pkg/epp/datalayer/collector.go), not every pod in one tick; and the
// precise index keeping at most 10 pods per block key, least recently stored forgotten first
// (llm-d-kv-cache pkg/kvcache/kvblock/in_memory.go, defaultPodsPerKey).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseConfig } from '../../../src/config/load.ts';
import { ReplicaRow } from '../../../src/registry/replica-table.ts';
import { BlockHolders } from '../../../src/router/anchors/block-holders.ts';
import { LLMD_PODS_PER_KEY, LLMD_REFRESH_MS } from '../../../src/router/policies/llm-d.ts';
import { fleetFromConfig } from '../../../native-bench/sim/fleet.ts';
import { FleetSim } from '../../../native-bench/sim/sim-run.ts';
import type { Workload } from '../../../native-bench/sim/workload-types.ts';

const empty: Workload = { name: 'none', next: () => null };

function scrapeTimes(policy: 'llm-d' | 'round-robin'): number[] {
  const fleet = fleetFromConfig('tiny', parseConfig({
    routing: { policy },
    pools: [{ id: 't', model: 'tiny-model', mock_profile: 'tiny', max_context_tokens: 2048,
      replicas: Array.from({ length: 5 }, (_, i) => ({ id: `t-${i + 1}`, url: `http://t-${i + 1}.sim:8000` })) }],
  }));
  const sim = new FleetSim({ pool: fleet.pools[0]!, fleet, policy, workload: empty, durationMs: 1000, gateways: 1, seed: 1 });
  sim.clock.advance(1000 + 0.5);
  const row = new ReplicaRow();
  return [0, 1, 2, 3, 4].map((slot) => {
    assert.ok(sim.gateways[0]!.readRow(slot, row));
    return row.lastGoodScrapeMs;
  });
}

test('llm-d scrapes each pod on its own timer, spread over its 50 ms interval; other policies scrape every replica at once', () => {
  const llmd = scrapeTimes('llm-d');
  assert.equal(new Set(llmd).size, 5, `llm-d's last scrapes: ${llmd.join(', ')}`);
  assert.ok(Math.max(...llmd) - Math.min(...llmd) < LLMD_REFRESH_MS);
  assert.ok(llmd.every((t) => t > 1000 - LLMD_REFRESH_MS));
  const rr = scrapeTimes('round-robin');
  assert.equal(new Set(rr).size, 1, `round robin's last scrapes: ${rr.join(', ')}`);
});

test('the precise index keeps 10 pods per block: an eleventh storing it makes the index forget the least recently stored', () => {
  const h = new BlockHolders(12, Infinity, LLMD_PODS_PER_KEY);
  for (let slot = 0; slot < 10; slot++) h.store(slot, 42);
  assert.equal(h.holderCount(42), 10);
  h.store(0, 42); // refreshed: slot 1 is now the least recent
  h.store(10, 42);
  assert.equal(h.holderCount(42), 10);
  assert.ok(!h.holds(1, 42) && h.holds(0, 42) && h.holds(10, 42));
  assert.equal(h.capDrops, 1);
  // A removal frees a place; a slot cleared leaves every group it was in.
  h.remove(0, 42);
  h.store(11, 42);
  assert.equal(h.holderCount(42), 10);
  assert.ok(h.holds(2, 42));
  h.clearSlot(11);
  assert.equal(h.holderCount(42), 9);
  const out = new Int32Array(12);
  h.lookup(new Float64Array([42]), [1, 2, 11], out);
  assert.deepEqual([...out.subarray(0, 3)], [0, 1, 0]);
  // Without a cap every holder stays.
  const free = new BlockHolders(12);
  for (let slot = 0; slot < 12; slot++) free.store(slot, 7);
  assert.equal(free.holderCount(7), 12);
});
