// The A/B method shared by end-to-end scenarios (after uWS's benchmark/compare.js): a same-target noise run
// first, then rounds that visit every target, the order reversed every other round so drift on a shared
// machine does not favour whoever runs first. Thread: bench main thread. Not on a hot path.
import { runLoad } from '../load/load-generator.ts';
import type { LoadResult, LoadSpec } from '../load/load-generator.ts';
import { median } from '../load/percentiles.ts';

export interface BenchTarget {
  name: string;
  origins: string[];
  /** Process trees whose CPU counts as the target's own (empty for direct). */
  proxyPids: number[];
}

export interface RoundRun {
  round: number;
  target: string;
  result: LoadResult;
}

export interface RoundsOutcome {
  runs: RoundRun[];
  /** |a - b| / mean of two back-to-back runs of the noise target's req/s (after every target's warm-up). */
  noise: number;
  /** The same for the noise target's proxy CPU per request (NaN when it has no proxy: direct). */
  cpuNoise: number;
}

export type LoadFor = (t: BenchTarget) => Omit<LoadSpec, 'origins'>;

const fmt = (x: number, digits = 2): string => (Number.isFinite(x) ? x.toFixed(digits) : 'n/a');

export async function runRounds(targets: readonly BenchTarget[], noiseTarget: BenchTarget, rounds: number,
  specFor: LoadFor, label: string): Promise<RoundsOutcome> {
  const load = (t: BenchTarget): Promise<LoadResult> => runLoad({ ...specFor(t), origins: t.origins });
  // One unmeasured pass per target first (a third of a run, at least 1,000 requests): a gateway's first
  // thousands of requests in a mode run while V8 is still compiling its hot paths, which would otherwise land
  // in the noise pair (reading as a 30-60 % noise floor) or in the first round.
  for (const t of targets.includes(noiseTarget) ? targets : [noiseTarget, ...targets]) {
    const spec = specFor(t);
    await runLoad({ ...spec, origins: t.origins, requests: Math.max(1000, Math.ceil(spec.requests / 3)) });
  }
  const a = await load(noiseTarget);
  const b = await load(noiseTarget);
  const spread = (x: number, y: number): number => Math.abs(x - y) / ((x + y) / 2);
  const noise = spread(a.requestsPerSecond, b.requestsPerSecond);
  const cpuNoise = spread(a.cpuMicrosPerRequest.proxy ?? NaN, b.cpuMicrosPerRequest.proxy ?? NaN);
  const runs: RoundRun[] = [];
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? targets : [...targets].reverse();
    for (const t of order) {
      const result = await load(t);
      runs.push({ round, target: t.name, result });
      console.error(`${label} round ${round + 1}/${rounds} ${t.name}: ${fmt(result.requestsPerSecond, 0)} req/s, `
        + `ttfb p50 ${fmt(result.ttfbMs.p50)} p99 ${fmt(result.ttfbMs.p99)} ms, errors ${result.errors}`
        + (result.firstError ? ` (${result.firstError})` : ''));
    }
  }
  return { runs, noise, cpuNoise };
}

/** Per-target medians over rounds, and figures paired per round against a reference target. */
export class RoundsView {
  private readonly runs: readonly RoundRun[];

  constructor(runs: readonly RoundRun[]) {
    this.runs = runs;
  }

  targets(): string[] {
    return [...new Set(this.runs.map((r) => r.target))];
  }

  of(name: string): RoundRun[] {
    return this.runs.filter((r) => r.target === name);
  }

  median(name: string, f: (r: LoadResult) => number): number {
    return median(this.of(name).map((r) => f(r.result)));
  }

  /** Median over rounds of (target - reference) in the same round; NaN when the reference did not run. */
  pairedDelta(name: string, reference: string, f: (r: LoadResult) => number): number {
    const ref = this.of(reference);
    if (ref.length === 0) return NaN;
    return median(this.of(name).map((r) => f(r.result) - f((ref.find((d) => d.round === r.round) ?? ref[0] as RoundRun).result)));
  }

  /** Median over rounds of target / reference in the same round. */
  pairedRatio(name: string, reference: string, f: (r: LoadResult) => number): number {
    const ref = this.of(reference);
    if (ref.length === 0) return NaN;
    return median(this.of(name).map((r) => f(r.result) / f((ref.find((d) => d.round === r.round) ?? ref[0] as RoundRun).result)));
  }
}

export { fmt };
