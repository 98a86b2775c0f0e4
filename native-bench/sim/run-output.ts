// Runs one sweep point and turns its figures into the contract's run object (rounded so the JSON reads
// well; rounding is deterministic, so the same flags still give the same bytes) plus its cost.
// Thread: main or a sweep worker.
import { readFileSync } from 'node:fs';
import type { RunFigures } from './metrics.ts';
import type { RunJson, RunOutput, RunSpec } from './run-types.ts';
import { ADMIT_ALL_DESCRIPTION } from './native-admission/admit-all.ts';
import { admissionNote, simulateRun } from './sim-run.ts';

function round(x: number, digits: number): number | null {
  if (!Number.isFinite(x)) return null;
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

export function runJson(spec: RunSpec, f: RunFigures): RunJson {
  const s = f.windowMs / 1000;
  return {
    policy: spec.policy,
    pool: spec.pool,
    load: spec.load,
    rps: spec.rps,
    speed: spec.speed,
    gateways: spec.gateways,
    offered_rps: round(f.offered / s, 2) ?? 0,
    admitted_rps: round(f.admitted / s, 2) ?? 0,
    goodput_rps: round(f.met / s, 2) ?? 0,
    slo_attainment: round(f.offered > 0 ? f.met / f.offered : Number.NaN, 4) ?? 0,
    completed: f.completed,
    shed: f.shed,
    shed_answer_ms_p99: round(f.shedAnswerP99, 3),
    ttft_ms: { p50: round(f.ttftP50, 1), p99: round(f.ttftP99, 1) },
    tpot_ms: { p95: round(f.tpotP95, 1) },
    kv_occupancy_mean: round(f.kvOccupancyMean, 4),
    preemptions: f.preemptions,
    prefix_hit_rate: { measured: round(f.hitMeasured, 4), predicted: round(f.hitPredicted, 4) },
    inflight_tokens_max_over_mean: round(f.inflightMaxOverMean, 3),
    seed: spec.seed,
    admission: spec.admission,
    dispatch_ms: spec.dispatchMs,
    admitted_within_slo: round(f.admittedAnswered > 0 ? f.admittedMet / f.admittedAnswered : Number.NaN, 4),
    shed_at_arrival: f.shedAtArrival,
    trace_window_s: null,
    max_tokens: spec.maxTokens,
    ttft_prediction: f.ttftPredictions > 0 ? { median_abs_error_pct: round(f.ttftPredErrP50 * 100, 1), p90_abs_error_pct: round(f.ttftPredErrP90 * 100, 1) } : null,
    reply_length_prediction: f.replyPredictions > 0
      ? { median_abs_error_pct: round(f.replyPredErrP50 * 100, 1), p90_abs_error_pct: round(f.replyPredErrP90 * 100, 1) }
      : null,
  };
}

/**
 * CPU time of the calling thread in ms, from /proc/thread-self/stat (utime + stime, in 10 ms clock ticks):
 * process.cpuUsage() counts every thread, and Node 20 has no per-thread figure. NaN off Linux.
 */
export function threadCpuMs(): number {
  try {
    const stat = readFileSync('/proc/thread-self/stat', 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) * 10;
  } catch {
    return Number.NaN;
  }
}

export function executeRun(spec: RunSpec): RunOutput {
  const c0 = threadCpuMs();
  const state = simulateRun(spec);
  return {
    index: spec.index,
    json: { ...runJson(spec, state.figures), prefix_index: state.prefixIndex, trace_window_s: state.traceWindowS },
    simulatedRequests: state.simulatedRequests,
    cpuMs: threadCpuMs() - c0,
    failed: state.figures.failed,
    admission: state.admission,
    nativeInterventions: state.nativeInterventions,
    twin: false,
  };
}

/**
 * The run `none` would have made at `spec`, from the same point's `native` run whose admission never acted
 * (nativeInterventions 0): with nothing rejected and nothing queued, the native admission routed every
 * request on arrival, as `none` does, so every event of the two runs is the same (run-twins.test.ts runs
 * both and compares). Only the admission's labels differ. Null when the native run did act, or is not one.
 */
export function noneTwin(native: RunOutput, spec: RunSpec): RunOutput | null {
  if (native.nativeInterventions !== 0 || spec.admission !== 'none') return null;
  return {
    ...native,
    index: spec.index,
    json: { ...native.json, admission: 'none' },
    admission: admissionNote('none', ADMIT_ALL_DESCRIPTION, spec.retryShed),
    nativeInterventions: null,
    simulatedRequests: 0,
    cpuMs: 0,
    twin: true,
  };
}
