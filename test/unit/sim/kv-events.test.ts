// The simulator with routing.prefix_index: events (the seed 8B pool's 40 replicas): kv-aware's predicted prefix-hit
// rate meets the engines' measured one within 2 points, with one gateway or four, where four gateways' approximate
// indexes on the same fleet and traffic miss it by more; four gateways, each seeing the others' work only in the
// scrape, serve about what one serves; --prefix-index (events by default in a race) overrides what the fleet's config says.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { parseArgs } from '../../../native-bench/sim/args.ts';
import { sweepJson } from '../../../native-bench/sim/json.ts';
import { planSweep, runSpecs } from '../../../native-bench/sim/sweep.ts';

const dir = mkdtempSync(join(tmpdir(), 'sim-kv-events-'));
after(() => rmSync(dir, { recursive: true, force: true }));

function fleetFile(index: 'events' | 'approximate'): string {
  const replicas = Array.from({ length: 40 }, (_, i) => `      - { id: 8b-${i + 1}, url: http://8b-${i + 1}.sim:8000, kv_events: tcp://8b-${i + 1}.sim:5557 }`);
  const path = join(dir, `${index}.yaml`);
  writeFileSync(path, [`routing:`, `  prefix_index: ${index}`, `pools:`, `  - id: 8b`, `    model: llama-3.1-8b-instruct`, `    mock_profile: llama-8b-a100`, `    replicas:`, ...replicas, ''].join('\n'));
  return path;
}

interface RunFigures { measured: number; predicted: number; index: string; attainment: number; shed: number }

async function hitRates(index: 'events' | 'approximate', flags: string[] = []): Promise<RunFigures> {
  const a = parseArgs(['--fleet', fleetFile(index), '--pool', '8b', '--load', '1', '--minutes', '0.3', '--policies', 'kv-aware', ...flags]);
  const plan = planSweep(a);
  const doc = JSON.parse(sweepJson(plan, a.fleet, a.workload, a.seed, await runSpecs(plan.specs, 1))) as
    { runs: Array<{ prefix_hit_rate: { measured: number; predicted: number }; prefix_index: string; slo_attainment: number; shed: number }> };
  const r = doc.runs[0]!;
  return { ...r.prefix_hit_rate, index: r.prefix_index, attainment: r.slo_attainment, shed: r.shed };
}

test('kv-aware on the events index predicts the engines\' hits within 2 points, with one gateway or four; the approximate index of four does not', async () => {
  const ev = await hitRates('events');
  assert.equal(ev.index, 'events');
  assert.ok(ev.measured > 0.2, `a workload with hits to predict (${ev.measured})`);
  assert.ok(Math.abs(ev.predicted - ev.measured) <= 0.02, `events: predicted ${ev.predicted} vs measured ${ev.measured}`);
  const ev4 = await hitRates('events', ['--gateways', '4']);
  assert.ok(Math.abs(ev4.predicted - ev4.measured) <= 0.02, `events, four gateways: predicted ${ev4.predicted} vs measured ${ev4.measured}`);
  // At the load one gateway serves whole, four lose little: each learns its decode step net of the prefill the
  // others put in its streams' steps, and counts their prefill arriving, from the replica's scraped counters.
  // Learned from our own dispatches alone, the steps read slow and admission shed a fifth of the load.
  assert.ok(ev.attainment >= 0.98, `one gateway: ${ev.attainment} within SLO`);
  assert.ok(ev4.attainment >= ev.attainment - 0.04, `four gateways: ${ev4.attainment} within SLO against ${ev.attainment} (${ev4.shed} shed)`);
  // Each of four gateways' approximate index learns only the quarter of the placements it made itself.
  const ap4 = await hitRates('approximate', ['--gateways', '4']);
  assert.equal(ap4.index, 'approximate');
  // The control: each under-predicts, and misses by more than the events index of four on the same traffic.
  const ev4Miss = Math.abs(ev4.predicted - ev4.measured);
  assert.ok(ap4.measured - ap4.predicted > ev4Miss + 0.005, `approximate, four gateways: predicted ${ap4.predicted} vs measured ${ap4.measured}, against the events index's miss of ${ev4Miss} (the control)`);
  // --prefix-index overrides the config's routing.prefix_index (a race sets events): the same run as the events file
  assert.deepEqual(await hitRates('approximate', ['--prefix-index', 'events']), ev);
});
