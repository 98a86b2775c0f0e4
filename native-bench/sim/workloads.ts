// `--workload` names → a Workload for one run: `seed-mix`, `mooncake:PATH`, `azure:PATH`. Trace files are
// read once per thread and kept (a sweep replays the same file in every run).
// Thread: the run's. Setup only.
import { SeedMixWorkload } from './seed-mix.ts';
import { readAzure, readMooncake, traceSpanMs, traceWindowStartMs, TraceWorkload, type MaxTokensMode, type TraceRecord } from './traces.ts';
import type { PoolShape, Workload } from './workload-types.ts';

export type WorkloadKind = { kind: 'seed-mix' } | { kind: 'mooncake' | 'azure'; path: string };

export function parseWorkload(spec: string): WorkloadKind {
  if (spec === 'seed-mix') return { kind: 'seed-mix' };
  const m = /^(mooncake|azure):(.+)$/.exec(spec);
  if (!m) throw new RangeError(`--workload must be seed-mix, mooncake:PATH or azure:PATH, got ${spec}`);
  return { kind: m[1] as 'mooncake' | 'azure', path: m[2]! };
}

const traces = new Map<string, TraceRecord[]>();

export function traceRecords(w: WorkloadKind): TraceRecord[] {
  if (w.kind === 'seed-mix') throw new Error('seed-mix is generated, not read');
  const key = `${w.kind}:${w.path}`;
  let recs = traces.get(key);
  if (!recs) {
    recs = w.kind === 'mooncake' ? readMooncake(w.path) : readAzure(w.path);
    traces.set(key, recs);
  }
  return recs;
}

/** Mean request rate of a trace as recorded (requests / span). */
export function traceRps(w: WorkloadKind): number {
  const recs = traceRecords(w);
  const span = traceSpanMs(recs);
  return span > 0 ? (recs.length * 1000) / span : 0;
}

/** Simulated duration of a run: --minutes, and for a trace at most the trace itself at its speed. */
export function runDurationMs(w: WorkloadKind, minutes: number, speed: number): number {
  const ms = minutes * 60_000;
  if (w.kind === 'seed-mix') return ms;
  return Math.min(ms, traceSpanMs(traceRecords(w)) / speed + 1);
}

/** Where seed `seed` starts replaying a trace, in trace ms (null for seed-mix, which is generated per seed). */
export function windowStartMs(w: WorkloadKind, seed: number): number | null {
  return w.kind === 'seed-mix' ? null : traceWindowStartMs(traceRecords(w), seed);
}

export interface WorkloadOptions {
  rps: number;
  speed: number;
  durationMs: number;
  /** Seeds the generated mix (seed-mix). */
  seed: number;
  /** The run's seed: a trace's window and its clients' max_tokens draws. */
  traceSeed: number;
  maxTokens: MaxTokensMode;
}

export function makeWorkload(w: WorkloadKind, pool: PoolShape, opts: WorkloadOptions): Workload {
  if (w.kind === 'seed-mix') return new SeedMixWorkload({ pool, rps: opts.rps, durationMs: opts.durationMs, seed: opts.seed });
  const records = traceRecords(w);
  return new TraceWorkload(`${w.kind}:${w.path}`, records, pool, opts.speed, opts.durationMs, {
    seed: opts.traceSeed, maxTokens: opts.maxTokens, windowStartMs: traceWindowStartMs(records, opts.traceSeed),
  });
}
