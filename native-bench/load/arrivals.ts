// Open-loop arrival schedules: when each request is due, fixed before the run, never depending on how the
// target answers (a closed loop slows down with the target and hides its queueing). `constant` spaces
// arrivals exactly 1/rate apart; `poisson` draws exponential gaps with mean 1/rate from a seeded generator,
// so the same seed gives the same schedule. Thread: the load generator's main thread, before a run.
// Not on a hot path: one Float64Array per run.
import { Prng } from '../sim/prng.ts';

export type ArrivalKind = 'constant' | 'poisson';

export function parseArrivalKind(s: string): ArrivalKind {
  if (s === 'constant' || s === 'poisson') return s;
  throw new Error(`--arrivals must be constant or poisson, not ${s}`);
}

/** Offsets in ms from the run's start of every arrival before `durationMs`, ascending; the first is at 0. */
export function arrivalOffsetsMs(kind: ArrivalKind, ratePerSecond: number, durationMs: number, seed = 1): Float64Array {
  if (!(ratePerSecond > 0) || !(durationMs > 0)) return new Float64Array(0);
  const gapMs = 1000 / ratePerSecond;
  if (kind === 'constant') {
    const n = Math.ceil(durationMs / gapMs);
    const out = new Float64Array(n);
    for (let i = 0; i < n; i++) out[i] = i * gapMs;
    return out;
  }
  const rng = new Prng(seed, 7);
  const out: number[] = [];
  for (let t = 0; t < durationMs; t += rng.exp(gapMs)) out.push(t);
  return Float64Array.from(out);
}
