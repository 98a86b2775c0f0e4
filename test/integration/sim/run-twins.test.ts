// The race's twin runs: a `native` run whose admission never acted is the `none` run at the same point, so the
// race takes `none`'s figures from it instead of simulating the point twice (noneTwin, RaceRunner.probe).
// Checked the only way that proves it: both runs simulated, compared field by field; and where dynamo's
// router queue does act, no twin is taken and the two runs differ.
// Each run is half a simulated minute of the seed mix on the demo fleet's 4-replica 8B pool.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseArgs } from '../../../native-bench/sim/args.ts';
import { planRace, runRace } from '../../../native-bench/sim/race.ts';
import { executeRun, noneTwin } from '../../../native-bench/sim/run-output.ts';
import type { AdmissionMode, RunOutput, RunSpec } from '../../../native-bench/sim/run-types.ts';
import { planPools, runSettings } from '../../../native-bench/sim/sweep.ts';

const args = parseArgs(['--race', '--fleet', 'demo', '--pool', '8b', '--minutes', '0.5']);
const capacityRps = planPools(args).capacities[0]!.capacityRps;

function spec(policy: string, admission: AdmissionMode, load: number): RunSpec {
  return {
    index: 0, fleet: 'demo', workload: 'seed-mix', pool: '8b', policy, load, rps: null, speed: null, offeredRps: load * capacityRps, traceSpeed: 1,
    minutes: 0.5, gateways: 1, seed: 101, retryShed: false, kills: [], restarts: [], admission, ...runSettings(args),
  };
}

/** What a run decided and measured: everything but its cost and how it was obtained. */
function outcome(o: RunOutput): Omit<RunOutput, 'cpuMs' | 'simulatedRequests' | 'twin'> {
  const { cpuMs: _c, simulatedRequests: _s, twin: _t, ...rest } = o;
  return rest;
}

test('a native run whose admission never acted is, field by field, the none run at that point', () => {
  for (const policy of ['dynamo', 'llm-d']) {
    const native = executeRun(spec(policy, 'native', 1));
    assert.equal(native.nativeInterventions, 0, `${policy} at 1× on 4 replicas: its admission should not act`);
    const none = executeRun(spec(policy, 'none', 1));
    const twin = noneTwin(native, spec(policy, 'none', 1));
    assert.ok(twin !== null && twin.twin && twin.cpuMs === 0);
    assert.deepEqual(outcome(twin), outcome(none));
    assert.equal(none.json.admission, 'none');
  }
});

test('where dynamo\'s router queue acts, there is no twin and the runs differ', () => {
  const native = executeRun(spec('dynamo', 'native', 5));
  assert.ok(native.nativeInterventions! > 0, 'at 5× every worker passes 16 × max_num_batched_tokens of prefill and requests queue');
  assert.equal(noneTwin(native, spec('dynamo', 'none', 5)), null);
  const none = executeRun(spec('dynamo', 'none', 5));
  assert.notDeepEqual(outcome(none).json, { ...outcome(native).json, admission: 'none' });
  assert.equal(noneTwin(none, spec('dynamo', 'none', 5)), null, 'only a native run has a twin');
});

test('a race of dynamo under none and native simulates each shared point once and reports the same capacity for both', async () => {
  // Round robin first, as kv-aware is in a full race: both dynamo chains then start from its result and
  // probe the same points while the queue does not act.
  const plan = planRace(parseArgs(['--race', '--fleet', 'demo', '--pool', '8b', '--minutes', '0.5', '--seeds', '1', '--policies', 'round-robin,dynamo', '--admission', 'none,native']));
  const result = await runRace(plan, 2);
  const none = result.runs.filter((o) => o.json.policy === 'dynamo' && o.json.admission === 'none');
  const native = result.runs.filter((o) => o.json.policy === 'dynamo' && o.json.admission === 'native');
  // At the points this race probes (up to about 3×, four replicas) Dynamo's queue never acts (the second test
  // shows where it does), so every point of the none chain is the native run's: none simulates nothing itself.
  assert.ok(none.length >= 4 && native.every((o) => o.nativeInterventions === 0), 'the native admission never acted in this race');
  assert.ok(none.every((o) => o.twin && o.simulatedRequests === 0 && o.cpuMs === 0), 'every none point taken from the native run');
  for (const t of none) {
    const at = native.find((o) => o.json.load === t.json.load);
    assert.ok(at !== undefined, `the native chain ran ${t.json.load}× too`);
    assert.deepEqual({ ...t.json, admission: 'native' }, at.json);
  }
  const capacity = (a: AdmissionMode): number => result.chains.find((c) => c.contender.policy === 'dynamo' && c.contender.admission === a)!.capacityRps;
  assert.equal(capacity('none'), capacity('native'));
  assert.ok(capacity('none') > 0 && capacity('native') > 0);
});
