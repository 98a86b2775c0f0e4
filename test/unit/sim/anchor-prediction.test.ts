// The acceptance for the anchors' information: fed by the engines' KV events, llm-d-precise and
// dynamo predict the engines' prefix hits (prompt tokens the engines served from cache) within 2 points;
// llm-d's approximate index, written at dispatch and sized from the scraped num_gpu_blocks, within 10.
// A small fleet (8 × llama-8b-a100) on the seed mix for 30 simulated seconds.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { fleetFromConfig } from '../../../native-bench/sim/fleet.ts';
import { FleetSim } from '../../../native-bench/sim/sim-run.ts';
import { makeWorkload, parseWorkload } from '../../../native-bench/sim/workloads.ts';
import { parseConfig } from '../../../src/config/load.ts';

const DURATION_MS = 30_000;

function run(policy: string): { measured: number; predicted: number } {
  const fleet = fleetFromConfig('small', parseConfig({
    pools: [{ id: '8b', model: 'llama-3.1-8b-instruct', mock_profile: 'llama-8b-a100',
      replicas: Array.from({ length: 8 }, (_, i) => ({ id: `8b-${i + 1}`, url: `http://8b-${i + 1}.sim:8000` })) }],
  }));
  const pool = fleet.pools[0]!;
  const workload = makeWorkload(parseWorkload('seed-mix'), pool, { rps: 25, speed: 1, durationMs: DURATION_MS, seed: 3, traceSeed: 3, maxTokens: 'caps' });
  const f = new FleetSim({ pool, fleet, policy, workload, durationMs: DURATION_MS, gateways: 1, seed: 3 }).run().figures;
  return { measured: 100 * f.hitMeasured, predicted: 100 * f.hitPredicted };
}

for (const [policy, points] of [['llm-d-precise', 2], ['dynamo', 2], ['llm-d', 10]] as const) {
  void test(`${policy} predicts the engines' prefix hits within ${points} points`, () => {
    const { measured, predicted } = run(policy);
    assert.ok(measured > 20, `a workload with prefix reuse (measured ${measured.toFixed(1)} %)`);
    assert.ok(Math.abs(predicted - measured) <= points, `predicted ${predicted.toFixed(1)} % against measured ${measured.toFixed(1)} %`);
  });
}
