// The race can tell policies apart: on the heavy-tailed seed mix, with no admission in the way, its
// bisection ranks random placement below round robin, and round robin below least-outstanding-tokens, on
// every seed (common random numbers: each seed's requests are the same for every policy) and on the mean.
// A harness that could not separate these could not be trusted to separate the real contenders.
// Real worker threads run the bisections' runs; the demo fleet's 4-replica 8B pool keeps it small.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseArgs } from '../../../native-bench/sim/args.ts';
import { planRace, runRace } from '../../../native-bench/sim/race.ts';
import { raceJson } from '../../../native-bench/sim/race-report.ts';

interface Doc {
  race: Record<string, unknown>;
  slo_capacity: Array<{ policy: string; admission: string; rps: number; ci95: [number, number] | null; per_seed: number[] }>;
  overload: unknown[];
  ratios: Array<{ policy: string; admission: string; vs: { policy: string; admission: string }; mean: number | null; ci95: [number, number] | null; per_seed: Array<number | null> }>;
  runs: Array<{ policy: string; admission: string; seed: number; load: number; slo_attainment: number; dispatch_ms: number; prefix_index: string; trace_window_s: number | null;
    ttft_prediction: unknown; reply_length_prediction: unknown }>;
}

test('the race ranks random < round robin < least-outstanding-tokens on every seed', async () => {
  const plan = planRace(parseArgs(['--race', '--fleet', 'demo', '--pool', '8b', '--minutes', '2', '--seeds', '2',
    '--policies', 'random,round-robin,least-outstanding-tokens', '--admission', 'none']));
  const result = await runRace(plan, 2);
  const doc = JSON.parse(raceJson(plan, result)) as Doc;
  assert.deepEqual(doc.race, {
    workload: 'seed-mix', pool: '8b', seeds: [101, 102], minutes: 2, max_tokens: 'caps', trace_windows_s: [], engine_bias_pct: 20, engine_error_pct: 3,
    step_jitter_pct: 10, batch_padding: true, bisection_tolerance: 0.01, slo_attainment_target: 0.9,
  });
  assert.deepEqual(doc.ratios, [], 'kv-aware is not in this race');
  assert.ok(doc.runs.every((r) => r.trace_window_s === null && 'ttft_prediction' in r && r.reply_length_prediction === null));
  assert.deepEqual(doc.overload, []); // kv-aware is not in this race
  assert.ok(doc.runs.every((r) => r.dispatch_ms === 2), 'a race dispatches with 2 ms from gateway to engine');
  assert.ok(doc.runs.every((r) => r.prefix_index === 'events'), 'a race feeds kv-aware\'s index from KV events, as dynamo\'s');
  const cap = (p: string): Doc['slo_capacity'][number] => doc.slo_capacity.find((c) => c.policy === p && c.admission === 'none')!;
  const [rnd, rr, lot] = [cap('random'), cap('round-robin'), cap('least-outstanding-tokens')];
  for (let s = 0; s < 2; s++) {
    assert.ok(rnd.per_seed[s]! < rr.per_seed[s]!, `seed ${s + 101}: random ${rnd.per_seed[s]} against round robin ${rr.per_seed[s]}`);
    assert.ok(rr.per_seed[s]! < lot.per_seed[s]!, `seed ${s + 101}: round robin ${rr.per_seed[s]} against least-outstanding-tokens ${lot.per_seed[s]}`);
  }
  assert.ok(rnd.rps < rr.rps && rr.rps < lot.rps);
  for (const c of [rnd, rr, lot]) {
    assert.ok(c.ci95 !== null && c.ci95[0] <= c.rps && c.rps <= c.ci95[1]);
    assert.ok(Math.abs(c.rps - (c.per_seed[0]! + c.per_seed[1]!) / 2) < 0.01);
  }
  // Each capacity is a bisection's result: on each seed, its rate passed and a rate at most 1 % above failed,
  // the capacity between them where attainment crosses 0.9.
  const capacityRps = (doc as unknown as { pools: Array<{ id: string; capacity_rps: number }> }).pools.find((x) => x.id === '8b')!.capacity_rps;
  for (const c of [rnd, rr, lot]) {
    for (const [s, seed] of [101, 102].entries()) {
      const runs = doc.runs.filter((r) => r.policy === c.policy && r.seed === seed);
      assert.ok(runs.every((r) => r.admission === 'none'));
      const passed = runs.filter((r) => r.slo_attainment >= 0.9).map((r) => r.load);
      const lo = Math.max(...passed);
      const above = runs.filter((r) => r.load > lo && r.slo_attainment < 0.9).map((r) => r.load);
      const hi = Math.min(...above);
      assert.ok(above.length > 0 && hi <= lo * 1.011, `${c.policy} seed ${seed}: ${lo} then ${hi}`);
      assert.ok(c.per_seed[s]! >= lo * capacityRps - 0.01 && c.per_seed[s]! <= hi * capacityRps + 0.01, `${c.policy} seed ${seed}: ${c.per_seed[s]} outside ${lo}–${hi}×`);
    }
  }
});
