// Nearest-rank percentiles and the summary the load reports print.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { median, percentileOfSorted, summarize } from '../../../native-bench/load/percentiles.ts';

test('nearest rank: the smallest value with at least q of the samples at or below it', () => {
  const s = Float64Array.from({ length: 100 }, (_, i) => i + 1);
  assert.equal(percentileOfSorted(s, 0.5), 50);
  assert.equal(percentileOfSorted(s, 0.95), 95);
  assert.equal(percentileOfSorted(s, 0.99), 99);
  assert.equal(percentileOfSorted(s, 1), 100);
  assert.equal(percentileOfSorted(s, 0), 1);
  assert.equal(percentileOfSorted([7], 0.99), 7);
  assert.ok(Number.isNaN(percentileOfSorted([], 0.5)));
});

test('summarize sorts numerically (not as strings) and reports mean, p50-p99 and max', () => {
  const p = summarize([10, 9, 100, 1, 2, 3, 4, 5, 6, 7, 8]);
  assert.equal(p.count, 11);
  assert.equal(p.p50, 6);
  assert.equal(p.p90, 10);
  assert.equal(p.p95, 100);
  assert.equal(p.p99, 100);
  assert.equal(p.max, 100);
  assert.equal(p.mean, 155 / 11);
  assert.ok(Number.isNaN(summarize([]).p99));
});

test('median of an even and an odd count', () => {
  assert.equal(median([3, 1, 2]), 2);
  assert.equal(median([4, 1, 3, 2]), 2.5);
  assert.ok(Number.isNaN(median([])));
});
