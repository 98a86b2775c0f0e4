// Summary statistics for latency samples: nearest-rank percentiles over a sorted copy.
// Thread: the bench process's main thread, after a run (never while requests are in flight).
// Not on any hot path: one sort per run, O(n log n) over at most a few hundred thousand samples.

export interface Percentiles {
  count: number;
  mean: number;
  p50: number;
  p90: number;
  p95: number;
  p99: number;
  max: number;
}

const EMPTY: Percentiles = Object.freeze({ count: 0, mean: NaN, p50: NaN, p90: NaN, p95: NaN, p99: NaN, max: NaN });

/** Nearest-rank percentile of an ascending array: the smallest value with at least q of the samples at or below it. */
export function percentileOfSorted(sorted: ArrayLike<number>, q: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.ceil(q * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))] ?? NaN;
}

export function summarize(samples: ArrayLike<number>): Percentiles {
  if (samples.length === 0) return EMPTY;
  // Float64Array sorts numerically without a comparator callback per pair.
  const sorted = Float64Array.from(samples).sort();
  let sum = 0;
  for (let i = 0; i < sorted.length; i++) sum += sorted[i] ?? 0;
  return {
    count: sorted.length,
    mean: sum / sorted.length,
    p50: percentileOfSorted(sorted, 0.5),
    p90: percentileOfSorted(sorted, 0.9),
    p95: percentileOfSorted(sorted, 0.95),
    p99: percentileOfSorted(sorted, 0.99),
    max: sorted[sorted.length - 1] ?? NaN,
  };
}

/** Median of a handful of per-round figures (rounds are few, so a sort per call is fine). */
export function median(values: readonly number[]): number {
  if (values.length === 0) return NaN;
  const s = [...values].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? (s[mid] ?? NaN) : ((s[mid - 1] ?? NaN) + (s[mid] ?? NaN)) / 2;
}
