// A race's results as the contract's JSON (`race`, `slo_capacity`, `overload` beside the sweep's `fleet`,
// `workload`, `seed`, `pools` and `runs`) and as markdown tables. Byte-stable: fixed key order, runs sorted by
// contender, seed and rate, figures rounded; nothing measured in wall or CPU time.
// Thread: main. Formatting only.
import type { Chain, OverloadRun, RacePlan, RaceResult } from './race.ts';
import { RATE_TOLERANCE, SLO_ATTAINMENT_TARGET } from './race.ts';
import { meanInterval, pairedRatio } from './race-stats.ts';
import { windowStartMs } from './workloads.ts';

function round(x: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

export interface CapacityRow {
  policy: string;
  admission: string;
  rps: number;
  ci95: [number, number] | null;
  per_seed: number[];
}

export interface OverloadRow {
  policy: string;
  admission: string;
  times_capacity: number | null;
  rps: number | null;
  offered_rps: number;
  goodput_rps: number;
  peak_goodput_rps: number;
  /** Mean over seeds of the best goodput of any bisection run, past capacity included. */
  best_probe_goodput_rps: number;
  shed_answer_ms_p99: number | null;
  preemptions: number;
  /** Mean over seeds of the share of admitted requests that met their SLO. */
  admitted_within_slo: number | null;
  /** Medians over seeds of the runs' median and p90 TTFT prediction errors, %. */
  ttft_prediction: { median_abs_error_pct: number | null; p90_abs_error_pct: number | null };
}

/** Per contender: the mean SLO capacity over seeds and its 95 % Student-t interval. */
export function capacityRows(plan: RacePlan, chains: readonly Chain[]): CapacityRow[] {
  return plan.contenders.map((c) => {
    const per = plan.seeds.map((seed) => chains.find((ch) => ch.contender === c && ch.seed === seed)!.capacityRps);
    const m = meanInterval(per);
    return {
      policy: c.policy, admission: c.admission, rps: round(m.mean, 2),
      ci95: m.ci95 ? [round(m.ci95[0], 2), round(m.ci95[1], 2)] : null, per_seed: per.map((x) => round(x, 2)),
    };
  });
}

export interface RatioRow {
  policy: string;
  admission: string;
  vs: { policy: string; admission: string };
  mean: number | null;
  ci95: [number, number] | null;
  per_seed: Array<number | null>;
}

const RATIO_POLICY = 'kv-aware';

/** kv-aware under each of its admissions against every other contender: per-seed capacity ratios, paired. */
export function ratioRows(plan: RacePlan, chains: readonly Chain[]): RatioRow[] {
  const caps = (c: RacePlan['contenders'][number]): number[] =>
    plan.seeds.map((seed) => chains.find((ch) => ch.contender === c && ch.seed === seed)!.capacityRps);
  const rows: RatioRow[] = [];
  for (const k of plan.contenders) {
    if (k.policy !== RATIO_POLICY) continue;
    const mine = caps(k);
    for (const o of plan.contenders) {
      if (o === k) continue;
      const r = pairedRatio(mine, caps(o));
      rows.push({
        policy: k.policy, admission: k.admission, vs: { policy: o.policy, admission: o.admission },
        mean: r.mean === null ? null : round(r.mean, 3), ci95: r.ci95 ? [round(r.ci95[0], 3), round(r.ci95[1], 3)] : null,
        per_seed: r.perSeed.map((x) => (x === null ? null : round(x, 3))),
      });
    }
  }
  return rows;
}

/** Each seed's window of the trace, trace seconds (empty for seed-mix). */
function traceWindows(plan: RacePlan): number[] {
  const out: number[] = [];
  for (const seed of plan.seeds) {
    const ms = windowStartMs(plan.workload, seed);
    if (ms !== null) out.push(round(ms / 1000, 1));
  }
  return out;
}

const mean = (xs: readonly number[]): number => xs.reduce((s, x) => s + x, 0) / xs.length;

/** Mean of the known figures (null when none is), rounded. */
function meanOf(xs: ReadonlyArray<number | null>, digits: number): number | null {
  const k = xs.filter((x): x is number => x !== null);
  return k.length > 0 ? round(mean(k), digits) : null;
}

/** Lower median of the known figures (null when none is): one seed's own figure, never an average of two. */
function medianOf(xs: ReadonlyArray<number | null>): number | null {
  const k = xs.filter((x): x is number => x !== null).sort((x, y) => x - y);
  return k.length > 0 ? k[Math.floor((k.length - 1) / 2)]! : null;
}

/**
 * One row per overload point, over seeds: offered, goodput, peak goodput (the best goodput of that seed's
 * bisection runs that met the attainment target) and the best of any of its bisection runs are means; the
 * shed answer p99 is the worst seed's; preemptions are the seeds' total; the share of admitted requests within
 * their SLO a mean, the TTFT prediction errors medians over seeds.
 */
export function overloadRows(overload: readonly OverloadRun[]): OverloadRow[] {
  const keys: Array<{ times: number | null; rps: number | null }> = [];
  for (const o of overload) if (!keys.some((k) => k.times === o.timesCapacity && k.rps === o.rps)) keys.push({ times: o.timesCapacity, rps: o.rps });
  return keys.map((k) => {
    const xs = overload.filter((o) => o.timesCapacity === k.times && o.rps === k.rps);
    const sheds = xs.map((o) => o.out.json.shed_answer_ms_p99).filter((x): x is number => x !== null);
    const j0 = xs[0]!.out.json;
    return {
      policy: j0.policy, admission: j0.admission, times_capacity: k.times, rps: k.rps,
      offered_rps: round(mean(xs.map((o) => o.out.json.offered_rps)), 2),
      goodput_rps: round(mean(xs.map((o) => o.out.json.goodput_rps)), 2),
      peak_goodput_rps: round(mean(xs.map((o) => o.peakGoodputRps)), 2),
      best_probe_goodput_rps: round(mean(xs.map((o) => o.bestProbeGoodputRps)), 2),
      shed_answer_ms_p99: sheds.length > 0 ? round(Math.max(...sheds), 3) : null,
      preemptions: xs.reduce((s, o) => s + o.out.json.preemptions, 0),
      admitted_within_slo: meanOf(xs.map((o) => o.out.json.admitted_within_slo), 4),
      ttft_prediction: {
        median_abs_error_pct: medianOf(xs.map((o) => o.out.json.ttft_prediction?.median_abs_error_pct ?? null)),
        p90_abs_error_pct: medianOf(xs.map((o) => o.out.json.ttft_prediction?.p90_abs_error_pct ?? null)),
      },
    };
  });
}

export function raceJson(plan: RacePlan, r: RaceResult): string {
  const a = plan.args;
  const doc = {
    fleet: plan.fleetName,
    workload: plan.workloadSpec,
    seed: a.seed,
    pools: plan.capacities.map((c) => ({ id: c.pool, replicas: c.replicas, capacity_rps: round(c.capacityRps, 2) })),
    race: {
      workload: plan.workloadSpec, pool: plan.pool.id, seeds: plan.seeds, minutes: a.minutes, max_tokens: a.maxTokens,
      trace_windows_s: traceWindows(plan), engine_bias_pct: a.engineBiasPct, engine_error_pct: a.engineErrorPct,
      step_jitter_pct: a.stepJitterPct, batch_padding: a.batchPadding, bisection_tolerance: RATE_TOLERANCE,
      slo_attainment_target: SLO_ATTAINMENT_TARGET,
    },
    slo_capacity: capacityRows(plan, r.chains),
    ratios: ratioRows(plan, r.chains),
    overload: overloadRows(r.overload),
    runs: r.runs.map((o) => o.json),
  };
  return `${JSON.stringify(doc, null, 2)}\n`;
}

function fmt(x: number | null, digits: number): string {
  return x === null ? '–' : x.toFixed(digits);
}

/** The TTFT prediction error of a contender's runs: medians of the runs' median and p90 errors. */
function predictionError(chains: readonly Chain[]): string {
  const med: number[] = [];
  const p90: number[] = [];
  for (const ch of chains) {
    for (const o of ch.runs) {
      const t = o.json.ttft_prediction;
      if (t?.median_abs_error_pct != null) med.push(t.median_abs_error_pct);
      if (t?.p90_abs_error_pct != null) p90.push(t.p90_abs_error_pct);
    }
  }
  if (med.length === 0) return '–';
  const mid = (xs: number[]): number => xs.sort((x, y) => x - y)[Math.floor((xs.length - 1) / 2)]!;
  return `${mid(med).toFixed(1)} / ${mid(p90).toFixed(1)} %`;
}

export function raceTables(plan: RacePlan, r: RaceResult): string {
  const a = plan.args;
  const rows = capacityRows(plan, r.chains);
  const base = rows.find((x) => x.policy === 'round-robin' && x.admission === 'native') ?? rows.find((x) => x.policy === 'round-robin');
  const lines = [
    `### SLO capacity: ${plan.workloadSpec} on pool ${plan.pool.id} (${plan.pool.replicas.length} × ${plan.pool.profile}), seeds ${plan.seeds.join(', ')}, ` +
      `${a.minutes} simulated min per run, max_tokens ${a.maxTokens === 'caps' ? 'the clients\' caps' : 'the recorded length'}, engines' figures off the nominal by a shared ±${a.engineBiasPct} % draw, ` +
      `each ±${a.engineErrorPct} % off that and ±${a.stepJitterPct} % per step, decode batches ${a.batchPadding ? '' : 'not '}padded to CUDA-graph sizes, ${a.dispatchMs} ms from gateway to engine, ` +
      `kv-aware's prefix index ${plan.prefixIndex === 'events' ? 'fed by KV events' : 'approximate (no KV events)'}`,
    '',
    `Highest offered rate with ≥ ${SLO_ATTAINMENT_TARGET * 100} % of requests within the SLO, bisected to within ${RATE_TOLERANCE * 100} % and the crossing interpolated; mean over seeds with a 95 % Student-t interval.`,
    '',
    `| policy | admission | SLO capacity rps | 95 % interval | per seed | × ${base ? `${base.policy} (${base.admission})` : '–'} | peak goodput rps | TTFT prediction error median / p90 | runs |`,
    '| --- | --- | ---: | --- | --- | ---: | ---: | ---: | ---: |',
  ];
  for (const row of rows) {
    const chains = r.chains.filter((ch) => ch.contender.policy === row.policy && ch.contender.admission === row.admission);
    const open = chains.some((ch) => ch.openAbove) ? ' (≥: never failed)' : '';
    const peak = mean(chains.map((ch) => ch.peakGoodputRps));
    lines.push(`| ${row.policy} | ${row.admission} | ${row.rps.toFixed(1)}${open} | ${row.ci95 ? `${row.ci95[0].toFixed(1)}–${row.ci95[1].toFixed(1)}` : '–'} | ` +
      `${row.per_seed.map((x) => x.toFixed(1)).join(', ')} | ${base && base.rps > 0 ? (row.rps / base.rps).toFixed(2) : '–'} | ${peak.toFixed(1)} | ` +
      `${predictionError(chains)} | ${chains.reduce((s, ch) => s + ch.runs.length, 0)} |`);
  }
  if (plan.missing.length > 0) lines.push('', `Not in this build's routing.policy schema, not run: ${plan.missing.join(', ')}.`);
  const ratios = ratioRows(plan, r.chains);
  if (ratios.length > 0) {
    lines.push('', '### Paired ratios', '', 'kv-aware\'s SLO capacity over each contender\'s, per seed (the same requests and engines), mean and paired 95 % t-interval.', '',
      '| kv-aware under | against | mean | 95 % interval | per seed |', '| --- | --- | ---: | --- | --- |');
    for (const x of ratios) {
      lines.push(`| ${x.admission} | ${x.vs.policy} (${x.vs.admission}) | ${fmt(x.mean, 2)} | ${x.ci95 ? `${x.ci95[0].toFixed(2)}–${x.ci95[1].toFixed(2)}` : '–'} | ` +
        `${x.per_seed.map((v) => fmt(v, 2)).join(', ')} |`);
    }
  }
  const over = overloadRows(r.overload);
  if (over.length > 0) {
    lines.push('', '### Overload', '', 'Means over seeds; peak goodput = the best goodput of that seed\'s bisection runs that met the attainment target, best probe = of any of them; ' +
      'shed answer p99 = the worst seed\'s; preemptions = total.', '',
      '| policy | admission | point | offered rps | goodput rps | peak goodput rps | goodput / peak | best probe goodput rps | shed answer p99 ms | preemptions | admitted within SLO | TTFT prediction error median / p90 |',
      '| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
    for (const o of over) {
      lines.push(`| ${o.policy} | ${o.admission} | ${o.times_capacity !== null ? `${o.times_capacity}× SLO capacity` : `${o.rps} rps`} | ${o.offered_rps.toFixed(1)} | ` +
        `${o.goodput_rps.toFixed(1)} | ${o.peak_goodput_rps.toFixed(1)} | ${o.peak_goodput_rps > 0 ? (o.goodput_rps / o.peak_goodput_rps).toFixed(2) : '–'} | ${o.best_probe_goodput_rps.toFixed(1)} | ` +
        `${fmt(o.shed_answer_ms_p99, 2)} | ${o.preemptions} | ${o.admitted_within_slo !== null ? `${(o.admitted_within_slo * 100).toFixed(1)} %` : '–'} | ` +
        `${o.ttft_prediction.median_abs_error_pct !== null ? `${fmt(o.ttft_prediction.median_abs_error_pct, 1)} / ${fmt(o.ttft_prediction.p90_abs_error_pct, 1)} %` : '–'} |`);
    }
  }
  return lines.join('\n');
}
