// The race's plan: the contract's policies, each under no admission and Expediter's, the routed systems with
// an admission of their own also under it; one pool, seeds from --seed, and the bisection starting at the
// pool's computed capacity.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseArgs, UsageError } from '../../../native-bench/sim/args.ts';
import { simPolicyNames } from '../../../native-bench/sim/policies.ts';
import { planRace, RACE_POLICIES, startReference } from '../../../native-bench/sim/race.ts';

test('a race runs every contract policy this build has under none and Expediter\'s admission, llm-d and dynamo also under their own', () => {
  const plan = planRace(parseArgs(['--race', '--fleet', 'demo', '--seed', '7']));
  const known = simPolicyNames();
  const own = new Set(['llm-d', 'llm-d-precise', 'dynamo']);
  const expected = RACE_POLICIES.filter((p) => known.includes(p))
    .flatMap((p) => (own.has(p) ? [`${p}/none`, `${p}/native`, `${p}/expediter`] : [`${p}/none`, `${p}/expediter`]));
  assert.deepEqual(plan.contenders.map((c) => `${c.policy}/${c.admission}`), expected);
  assert.deepEqual(plan.missing, RACE_POLICIES.filter((p) => !known.includes(p)));
  assert.deepEqual(plan.seeds, [7, 8, 9, 10, 11]);
  assert.equal(plan.pool.id, '8b');
  assert.equal(plan.axis, 'load');
  assert.equal(plan.start, 1);
  assert.equal(plan.args.minutes, 2);
});

test('--admission narrows a race; an empty race is a usage error', () => {
  const plan = planRace(parseArgs(['--race', '--fleet', 'demo', '--policies', 'dynamo,kv-aware', '--admission', 'native', '--seeds', '2']));
  assert.deepEqual(plan.contenders.map((c) => `${c.policy}/${c.admission}`), ['dynamo/native']);
  assert.deepEqual(plan.seeds, [101, 102]);
  assert.throws(() => planRace(parseArgs(['--race', '--fleet', 'demo', '--policies', 'kv-aware', '--admission', 'native'])),
    (e: unknown) => e instanceof UsageError && /no policy and admission/.test(e.message));
  assert.throws(() => planRace(parseArgs(['--race', '--policies', 'best-effort'])), /unknown best-effort/);
});

test('searches start from a reference: kv-aware under Expediter\'s admission for the others under it, else the first contender', () => {
  const plan = planRace(parseArgs(['--race', '--fleet', 'demo']));
  const name = (c: { policy: string; admission: string }): string => `${c.policy}/${c.admission}`;
  const refs = Object.fromEntries(plan.contenders.map((c) => [name(c), name(startReference(c, plan.contenders))]));
  assert.equal(refs['kv-aware/none'], 'kv-aware/none');
  assert.equal(refs['kv-aware/expediter'], 'kv-aware/none');
  assert.equal(refs['round-robin/expediter'], 'kv-aware/expediter');
  assert.equal(refs['dynamo/expediter'], 'kv-aware/expediter');
  assert.equal(refs['dynamo/native'], 'kv-aware/none');
  assert.equal(refs['round-robin/none'], 'kv-aware/none');
  // Without kv-aware under Expediter's admission in the race, the first contender is every reference.
  const alone = planRace(parseArgs(['--race', '--fleet', 'demo', '--policies', 'round-robin,dynamo']));
  for (const c of alone.contenders) assert.equal(name(startReference(c, alone.contenders)), 'round-robin/none');
});
