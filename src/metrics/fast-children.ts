// Labelled children that cost one property lookup and an add per call. prom-client 15 re-derives a child's
// series on every observe()/inc(): it builds a label object, validates every label name, concatenates the
// hash string `name:value,` per label and looks that up in the metric's hashMap. The gateway makes ~10 such
// calls per request, which measured ≈ 3 µs and ≈ 2 KB of garbage per request (`npm run bench -- pipeline`).
// These children do the label work once, at setup, and per call add to the series entry exactly as
// prom-client's own code does after its hashing.
//
// Correctness never depends on reproducing prom-client's hash: when the entry is missing (the first call,
// after a registry reset, or if a prom-client upgrade changed the hash format) the call goes through
// prom-client's own child, which creates the entry; only the speed depends on the hash matching.
// test/unit/metrics/fast-children.test.ts checks the exposition equals stock prom-client's for the same
// calls, and that the fast path is the one taken. prom-client is pinned (package.json) for this reason.
// Thread: any (main thread families and worker-thread families). Hot path: observe()/inc().
import type { Counter, Histogram } from 'prom-client';

export interface Observer { observe(value: number): void }
export interface Incrementer { inc(value?: number): void }

/** The fields of prom-client 15's Histogram and Counter that the fast path reads (lib/histogram.js, lib/counter.js). */
interface HistogramEntry { bucketValues: Record<string, number>; sum: number; count: number }
interface HistogramInternals { hashMap: Record<string, HistogramEntry | undefined>; upperBounds: number[]; sortedLabelNames: string[]; labelNames: string[] }
interface CounterEntry { value: number }
interface CounterInternals { hashMap: Record<string, CounterEntry | undefined>; sortedLabelNames: string[]; labelNames: string[] }

/** prom-client's series key for these label values (util.js hashObject over the sorted label names). */
function seriesHash(m: { labelNames: string[]; sortedLabelNames: string[] }, values: readonly string[]): string {
  let hash = '';
  for (const name of m.sortedLabelNames) {
    const v = values[m.labelNames.indexOf(name)];
    if (v !== undefined) hash += `${name}:${v},`;
  }
  return hash;
}

class FastObserver implements Observer {
  private readonly bounds: readonly number[];
  /** String keys of bucketValues, one per bound: no number-to-string conversion per call. */
  private readonly boundKeys: readonly string[];

  constructor(private readonly metric: HistogramInternals, readonly hash: string, private readonly slow: Observer) {
    this.bounds = metric.upperBounds;
    this.boundKeys = metric.upperBounds.map(String);
  }

  observe(value: number): void {
    // Read the map through the metric each time: reset() replaces it with a new object.
    const entry = this.metric.hashMap[this.hash];
    if (entry === undefined || !Number.isFinite(value)) {
      this.slow.observe(value); // creates the series, or throws prom-client's own TypeError for NaN/Infinity
      return;
    }
    const bounds = this.bounds;
    for (let i = 0; i < bounds.length; i++) {
      if (value <= bounds[i]!) {
        entry.bucketValues[this.boundKeys[i]!]! += 1;
        break;
      }
    }
    entry.sum += value;
    entry.count += 1;
  }

  /** True once the series exists under the hash this child computed: later calls take the fast path. */
  get fast(): boolean {
    return this.metric.hashMap[this.hash] !== undefined;
  }
}

class FastIncrementer implements Incrementer {
  constructor(private readonly metric: CounterInternals, readonly hash: string, private readonly slow: Incrementer) {}

  inc(value = 1): void {
    const entry = this.metric.hashMap[this.hash];
    // typeof first: a string or boolean passes `>= 0` by coercion, and `+=` would concatenate into the series.
    if (entry === undefined || typeof value !== 'number' || !(value >= 0) || value === Infinity) {
      this.slow.inc(value); // creates the series, or throws prom-client's own error (not a number, negative, Infinity)
      return;
    }
    entry.value += value;
  }

  get fast(): boolean {
    return this.metric.hashMap[this.hash] !== undefined;
  }
}

export function histogramChild<L extends string>(h: Histogram<L>, ...values: string[]): Observer & { readonly fast: boolean } {
  const slow = h.labels(...values); // validates the label count and names at setup
  const internals = h as unknown as HistogramInternals;
  return new FastObserver(internals, seriesHash(internals, values), slow);
}

export function counterChild<L extends string>(c: Counter<L>, ...values: string[]): Incrementer & { readonly fast: boolean } {
  const slow = c.labels(...values);
  const internals = c as unknown as CounterInternals;
  return new FastIncrementer(internals, seriesHash(internals, values), slow);
}
