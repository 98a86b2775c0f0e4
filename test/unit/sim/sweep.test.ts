// Flags → a sweep plan, and determinism: the same flags give the same JSON byte for byte, whether the runs
// execute inline or on worker threads; another seed gives other figures.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseArgs, UsageError } from '../../../native-bench/sim/args.ts';
import { sweepJson } from '../../../native-bench/sim/json.ts';
import { policyNames } from '../../../native-bench/sim/policies.ts';
import { planSweep, runSpecs } from '../../../native-bench/sim/sweep.ts';

test('flags parse into a sweep; bad flags are usage errors that name the flag', () => {
  const a = parseArgs(['--fleet', 'demo', '--workload=seed-mix', '--load', '0.5,1,2', '--minutes', '0.5', '--gateways', '4',
    '--seed', '3', '--retry-shed', '--kill', '8b-2@30', '--restart', '8b-2@60', '--json', 'x.json', '--plot', 'p.svg', '--policies', 'round-robin']);
  assert.deepEqual(a.load, [0.5, 1, 2]);
  assert.equal(a.minutes, 0.5);
  assert.equal(a.gateways, 4);
  assert.equal(a.seed, 3);
  assert.equal(a.retryShed, true);
  assert.deepEqual(a.kills, [{ replica: '8b-2', atS: 30 }]);
  assert.deepEqual(a.restarts, [{ replica: '8b-2', atS: 60 }]);
  assert.deepEqual(a.policies, ['round-robin']);
  assert.equal(a.plot, 'p.svg');
  const bad: Array<[string[], RegExp]> = [
    [['--load', '1', '--rps', '5'], /one of --load, --rps, --speed/],
    [['--load', '0,1'], /--load takes/],
    [['--kill', '8b-2'], /REPLICA@SECONDS/],
    [['--speed', '2'], /--speed applies to traces/],
    [['--plot', 'x.png'], /PATH\.svg/],
    [['--gateways', '1.5'], /positive integer/],
    [['--frobnicate'], /unknown flag/],
    [['--minutes'], /needs a value/],
  ];
  for (const [argv, re] of bad) assert.throws(() => parseArgs(argv), (e: unknown) => e instanceof UsageError && re.test(e.message), argv.join(' '));
});

test('race flags: a race defaults to every admission, a biased fleet of perturbed engines, KV events for kv-aware, clients\' caps, 5 seeds from 101 and the workload\'s minutes', () => {
  const r = parseArgs(['--race', '--workload', 'mooncake:/x.jsonl']);
  assert.equal(r.race, true);
  assert.deepEqual(r.admissions, ['none', 'native', 'expediter']);
  assert.equal(r.engineBiasPct, 20);
  assert.equal(r.engineErrorPct, 3);
  assert.equal(r.stepJitterPct, 10);
  assert.equal(r.batchPadding, true);
  assert.equal(r.maxTokens, 'caps');
  assert.equal(r.dispatchMs, 2);
  assert.equal(r.prefixIndex, 'events');
  assert.equal(r.seeds, 5);
  assert.equal(r.seed, 101, 'the race\'s seeds are not the tuning seeds 1-5');
  assert.equal(parseArgs([]).seed, 1);
  assert.equal(parseArgs([]).engineBiasPct, 0);
  assert.equal(parseArgs(['--no-batch-padding']).batchPadding, false);
  assert.equal(parseArgs(['--max-tokens', 'recorded']).maxTokens, 'recorded');
  assert.throws(() => parseArgs(['--race', '--max-tokens', 'recorded']), (e: unknown) => e instanceof UsageError && /never a race/.test(e.message));
  assert.throws(() => parseArgs(['--max-tokens', 'answers']), (e: unknown) => e instanceof UsageError && /--max-tokens takes caps or recorded/.test(e.message));
  assert.equal(r.minutes, 8);
  assert.equal(parseArgs(['--race']).minutes, 2);
  const s = parseArgs(['--admission', 'native', '--engine-error', '0', '--step-jitter', '5', '--kv-scale', '0.25']);
  assert.equal(s.race, false);
  assert.deepEqual(s.admissions, ['native']);
  assert.equal(s.engineErrorPct, 0);
  assert.equal(s.stepJitterPct, 5);
  assert.equal(s.kvScale, 0.25);
  assert.deepEqual(parseArgs([]).admissions, ['expediter']);
  assert.equal(parseArgs([]).engineErrorPct, 0);
  assert.equal(parseArgs([]).dispatchMs, 0);
  assert.equal(parseArgs(['--race', '--dispatch-ms', '0']).dispatchMs, 0);
  assert.equal(parseArgs(['--dispatch-ms=0.5']).dispatchMs, 0.5);
  assert.equal(parseArgs([]).prefixIndex, null, 'outside a race the fleet config decides');
  assert.equal(parseArgs(['--race', '--prefix-index', 'approximate']).prefixIndex, 'approximate');
  const bad: Array<[string[], RegExp]> = [
    [['--admission', 'fancy'], /--admission: unknown fancy/],
    [['--engine-error', '100'], /percentage/],
    [['--dispatch-ms', '-1'], /--dispatch-ms takes a number ≥ 0/],
    [['--dispatch-ms', ''], /--dispatch-ms takes a number ≥ 0/],
    [['--prefix-index', 'exact'], /--prefix-index takes approximate or events, got exact/],
    [['--seeds', '3'], /--seeds applies to --race/],
    [['--race', '--load', '1'], /--race finds/],
    [['--race', '--kill', '8b-1@3'], /without faults/],
  ];
  for (const [argv, re] of bad) assert.throws(() => parseArgs(argv), (e: unknown) => e instanceof UsageError && re.test(e.message), argv.join(' '));
});

test('--admission LIST plans each policy under each; --kv-scale shrinks the pool the capacity sees', () => {
  const plan = planSweep(parseArgs(['--fleet', 'demo', '--pool', '8b', '--policies', 'round-robin,kv-aware', '--admission', 'native,expediter']));
  assert.deepEqual(plan.specs.map((s) => `${s.policy}/${s.admission}`), ['round-robin/native', 'round-robin/expediter', 'kv-aware/native', 'kv-aware/expediter']);
  const small = planSweep(parseArgs(['--fleet', 'demo', '--pool', '8b', '--kv-scale', '0.05']));
  assert.equal(small.pools[0]!.numGpuBlocks, Math.round(27_648 * 0.05));
  assert.equal(small.capacities[0]!.boundBy, 'kv');
});

test('the plan: every schema policy by default, load points scaled by each pool\'s capacity, faults kept to their pool', () => {
  const plan = planSweep(parseArgs(['--fleet', 'seed', '--load', '0.5,2', '--kill', '8b-3@10']));
  assert.deepEqual(plan.pools.map((p) => p.id), ['70b', '8b', 'lora']);
  assert.equal(plan.pools.find((p) => p.id === 'lora')!.adapters.length, 60);
  assert.equal(plan.specs.length, 3 * policyNames().length * 2);
  for (const s of plan.specs) {
    const cap = plan.capacities.find((c) => c.pool === s.pool)!.capacityRps;
    assert.ok(Math.abs(s.offeredRps! - s.load! * cap) < 1e-9);
    assert.deepEqual(s.kills, s.pool === '8b' ? [{ replica: '8b-3', atS: 10 }] : []);
  }
  assert.throws(() => planSweep(parseArgs(['--policies', 'best-effort'])), /unknown best-effort/);
  assert.throws(() => planSweep(parseArgs(['--pool', 'nope'])), /--pool nope/);
  assert.throws(() => planSweep(parseArgs(['--kill', 'zz-1@3'])), /no replica zz-1/);
});

test('same flags, same JSON byte for byte; inline and on worker threads alike', async () => {
  const argv = ['--fleet', 'demo', '--pool', '8b', '--load', '1', '--minutes', '0.1'];
  const json = async (extra: string[], threads: number): Promise<string> => {
    const a = parseArgs([...argv, ...extra]);
    const plan = planSweep(a);
    return sweepJson(plan, a.fleet, a.workload, a.seed, await runSpecs(plan.specs, threads));
  };
  const one = await json([], 1);
  assert.equal(await json([], 1), one);
  assert.equal(await json([], 2), one);
  type Run = { policy: string; completed: number; shed: number; offered_rps: number; admitted_rps: number; goodput_rps: number; slo_attainment: number };
  const doc = JSON.parse(one) as { runs: Run[] };
  assert.deepEqual(doc.runs.map((r) => r.policy), policyNames());
  // Every policy is offered the same arrivals (one seed), and each arrival ends completed or shed.
  const [first] = doc.runs;
  assert.ok(first!.completed > 0);
  for (const r of doc.runs) {
    assert.equal(r.offered_rps, first!.offered_rps, `${r.policy}: offered the same load`);
    assert.equal(r.completed + r.shed, first!.completed + first!.shed, `${r.policy}: every arrival completed or shed`);
    assert.ok(r.admitted_rps <= r.offered_rps && r.goodput_rps <= r.admitted_rps, `${r.policy}: goodput <= admitted <= offered`);
    assert.ok(Math.abs(r.slo_attainment * r.offered_rps - r.goodput_rps) < 0.01 * r.offered_rps + 0.01, `${r.policy}: goodput is the offered share within SLO`);
  }
  assert.notEqual(await json(['--seed', '2'], 1), one);
});
