// Property-based testing for the unit suites: the one module that imports fast-check (ESLint keeps it so).
// Every property runs with a fixed seed and a bounded number of runs, so CI is fast and a failure reproduces:
// fast-check's message names the seed and the shrunk counterexample's path; FUZZ_SEED / FUZZ_RUNS override
// them to explore (`FUZZ_SEED=7 FUZZ_RUNS=5000 node --import tsx --test test/unit/…/x.fuzz.test.ts`).
import fc from 'fast-check';

export { fc };

export const FUZZ_SEED = Number(process.env.FUZZ_SEED ?? 0x5eed);
const RUNS_OVERRIDE = process.env.FUZZ_RUNS === undefined ? null : Number(process.env.FUZZ_RUNS);

/** Checks a synchronous property `numRuns` times from the fixed seed; throws with the seed and counterexample. */
export function check<Ts extends [unknown, ...unknown[]]>(property: fc.IProperty<Ts>, numRuns = 300): void {
  fc.assert(property, { seed: FUZZ_SEED, numRuns: RUNS_OVERRIDE ?? numRuns, endOnFailure: false });
}

/** Cut points that split `length` bytes into chunks (sorted, distinct, inside (0, length)). */
export function cuts(length: number, max = 12): fc.Arbitrary<number[]> {
  if (length < 2) return fc.constant([]);
  return fc.uniqueArray(fc.integer({ min: 1, max: length - 1 }), { maxLength: Math.min(max, length - 1) }).map((a) => a.sort((x, y) => x - y));
}

/** `bytes` split at `at` (as cuts() makes them). */
export function splitAt(bytes: Buffer, at: readonly number[]): Buffer[] {
  const out: Buffer[] = [];
  let from = 0;
  for (const c of at) {
    out.push(bytes.subarray(from, c));
    from = c;
  }
  out.push(bytes.subarray(from));
  return out;
}
