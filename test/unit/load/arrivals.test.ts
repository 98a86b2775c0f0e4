// Open-loop arrival schedules: constant spacing is exact, Poisson gaps average 1/rate and are seeded.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { arrivalOffsetsMs, parseArrivalKind } from '../../../native-bench/load/arrivals.ts';

test('constant: rate × duration arrivals exactly 1/rate apart, the first at 0, all before the end', () => {
  const a = arrivalOffsetsMs('constant', 250, 2000);
  assert.equal(a.length, 500);
  assert.equal(a[0], 0);
  for (let i = 1; i < a.length; i++) assert.ok(Math.abs(a[i]! - a[i - 1]! - 4) < 1e-9);
  assert.ok(a[a.length - 1]! < 2000);
  assert.equal(arrivalOffsetsMs('constant', 3, 1000).length, 3);
});

test('poisson: ascending, inside the window, mean gap 1/rate, gaps vary like an exponential', () => {
  const a = arrivalOffsetsMs('poisson', 1000, 60_000, 5);
  assert.ok(Math.abs(a.length - 60_000) < 60_000 * 0.02, `count ${a.length}`);
  const gaps: number[] = [];
  for (let i = 1; i < a.length; i++) {
    assert.ok(a[i]! >= a[i - 1]!);
    gaps.push(a[i]! - a[i - 1]!);
  }
  assert.ok(a[a.length - 1]! < 60_000);
  const mean = gaps.reduce((s, g) => s + g, 0) / gaps.length;
  const sd = Math.sqrt(gaps.reduce((s, g) => s + (g - mean) ** 2, 0) / gaps.length);
  assert.ok(Math.abs(mean - 1) < 0.02, `mean gap ${mean}`);
  // An exponential's standard deviation equals its mean; a constant schedule's is 0.
  assert.ok(Math.abs(sd - 1) < 0.05, `gap sd ${sd}`);
  // P(gap > 3 × mean) = e^-3 ≈ 5 %.
  const over3 = gaps.filter((g) => g > 3).length / gaps.length;
  assert.ok(Math.abs(over3 - Math.exp(-3)) < 0.005, `tail share ${over3}`);
});

test('poisson: the same seed gives the same schedule, another seed another', () => {
  assert.deepEqual(arrivalOffsetsMs('poisson', 50, 10_000, 3), arrivalOffsetsMs('poisson', 50, 10_000, 3));
  assert.notDeepEqual(arrivalOffsetsMs('poisson', 50, 10_000, 3), arrivalOffsetsMs('poisson', 50, 10_000, 4));
});

test('no arrivals for a zero rate or window; unknown kinds are refused', () => {
  assert.equal(arrivalOffsetsMs('constant', 0, 1000).length, 0);
  assert.equal(arrivalOffsetsMs('poisson', 10, 0).length, 0);
  assert.equal(parseArrivalKind('poisson'), 'poisson');
  assert.throws(() => parseArrivalKind('bursty'), /constant or poisson/);
});
