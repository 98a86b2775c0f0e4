// The race's statistics: bracketing and bisection find a threshold to within the tolerance in few probes,
// and the interval over seeds uses Student's t with n − 1 degrees of freedom.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { bisectCapacity, meanInterval, studentT975 } from '../../../native-bench/sim/race-stats.ts';

const opts = { start: 100, step: 1.25, tolerance: 0.03, maxBracketSteps: 12 };

test('bisection brackets upwards then narrows to within 3 % of a threshold above the start', async () => {
  const r = await bisectCapacity(async (x) => x <= 173.2, opts);
  assert.ok(r.lo !== null && r.hi !== null);
  assert.ok(r.lo <= 173.2 && r.hi > 173.2, `${r.lo}..${r.hi}`);
  assert.ok(r.hi <= r.lo * 1.03 + 1e-9);
  // Every rate tried at or below the threshold passed: lo is the highest of them.
  assert.equal(r.lo, Math.max(...r.tried.filter((x) => x <= 173.2)));
  assert.deepEqual(r.tried.slice(0, 4), [100, 125, 156.25, 195.3125]);
  assert.ok(r.tried.length <= 8, `${r.tried.length} probes`);
});

test('bisection brackets downwards when the start fails', async () => {
  const r = await bisectCapacity(async (x) => x <= 41, opts);
  assert.ok(r.lo! <= 41 && r.hi! > 41 && r.hi! <= r.lo! * 1.03 + 1e-9, `${r.lo}..${r.hi}`);
  assert.deepEqual(r.tried.slice(0, 2), [100, 80]);
});

test('bisection reports an open bracket when nothing passes or everything passes', async () => {
  const none = await bisectCapacity(async () => false, { ...opts, maxBracketSteps: 3 });
  assert.equal(none.lo, null);
  assert.equal(none.tried.length, 4);
  const all = await bisectCapacity(async () => true, { ...opts, maxBracketSteps: 3 });
  assert.equal(all.hi, null);
  assert.ok(Math.abs(all.lo! - 100 * 1.25 ** 3) < 1e-9);
});

test('Student t: 3 seeds give 4.303 (2 dof); the interval is mean ± t·s/√n', () => {
  assert.equal(studentT975(2), 4.303);
  assert.equal(studentT975(1), 12.706);
  assert.equal(studentT975(100), 1.96);
  assert.throws(() => studentT975(0), /positive integer/);
  const m = meanInterval([9.0, 9.4, 8.9]);
  const mean = (9.0 + 9.4 + 8.9) / 3;
  const s = Math.sqrt(((9.0 - mean) ** 2 + (9.4 - mean) ** 2 + (8.9 - mean) ** 2) / 2);
  assert.ok(Math.abs(m.mean - mean) < 1e-12);
  assert.ok(Math.abs(m.ci95![0] - (mean - 4.303 * s / Math.sqrt(3))) < 1e-12);
  assert.ok(Math.abs(m.ci95![1] - (mean + 4.303 * s / Math.sqrt(3))) < 1e-12);
  assert.equal(meanInterval([5]).ci95, null);
  assert.deepEqual(meanInterval([2, 2, 2]).ci95, [2, 2]);
});
