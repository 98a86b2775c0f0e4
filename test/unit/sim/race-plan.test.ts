// The race's plan: the contract's policies, each under each admission except kv-aware (Expediter's only),
// one pool, seeds from --seed, and the bisection starting at the pool's computed capacity.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseArgs, UsageError } from '../../../native-bench/sim/args.ts';
import { simPolicyNames } from '../../../native-bench/sim/policies.ts';
import { planRace, RACE_POLICIES } from '../../../native-bench/sim/race.ts';

test('a race runs every contract policy this build has, both admissions, kv-aware under Expediter\'s only', () => {
  const plan = planRace(parseArgs(['--race', '--fleet', 'demo', '--seed', '7']));
  const known = simPolicyNames();
  const expected = RACE_POLICIES.filter((p) => known.includes(p))
    .flatMap((p) => (p === 'kv-aware' ? ['kv-aware/expediter'] : [`${p}/native`, `${p}/expediter`]));
  assert.deepEqual(plan.contenders.map((c) => `${c.policy}/${c.admission}`), expected);
  assert.deepEqual(plan.missing, RACE_POLICIES.filter((p) => !known.includes(p)));
  assert.deepEqual(plan.seeds, [7, 8, 9]);
  assert.equal(plan.pool.id, '8b');
  assert.equal(plan.axis, 'load');
  assert.equal(plan.start, 1);
  assert.equal(plan.args.minutes, 2);
});

test('--admission narrows a race; an empty race is a usage error', () => {
  const plan = planRace(parseArgs(['--race', '--fleet', 'demo', '--policies', 'round-robin,kv-aware', '--admission', 'native', '--seeds', '2']));
  assert.deepEqual(plan.contenders.map((c) => `${c.policy}/${c.admission}`), ['round-robin/native']);
  assert.deepEqual(plan.seeds, [1, 2]);
  assert.throws(() => planRace(parseArgs(['--race', '--fleet', 'demo', '--policies', 'kv-aware', '--admission', 'native'])),
    (e: unknown) => e instanceof UsageError && /no policy and admission/.test(e.message));
  assert.throws(() => planRace(parseArgs(['--race', '--policies', 'best-effort'])), /unknown best-effort/);
});
