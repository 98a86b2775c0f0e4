// `--race`: every policy's SLO capacity on one workload, honestly. For each policy, admission mode and seed,
// the highest offered rate (a multiple of the pool's computed capacity for seed-mix, the time compression
// for a trace) at which ≥ 90 % of requests meet the SLO, found by bracketing and regula falsi to within 1 %
// and read where attainment crosses 0.9 (race-stats.ts); then kv-aware under Expediter's admission past that
// capacity (2× and 3×, and 5,000 requests/s on seed-mix). Common random numbers: a seed's workload (its
// trace window, its clients' caps) depends on the seed and the rate only, and its engines' draws (the pool's
// shared bias, each replica's error) on the seed, the same for every policy.
// Thread: main. Orchestration: each search is a chain of runs, the RunPool keeps every thread busy.
import type { SweepArgs } from './args.ts';
import { UsageError } from './args.ts';
import type { PoolCapacity } from './capacity.ts';
import type { SimPool } from './fleet.ts';
import { simPolicyNames } from './policies.ts';
import { bisectCapacity, crossing, goodputPeaks, pairedStart } from './race-stats.ts';
import { noneTwin } from './run-output.ts';
import { RunPool } from './run-pool.ts';
import type { AdmissionMode, PrefixIndexMode, RunOutput, RunSpec } from './run-types.ts';
import { checkPolicies, planPools, runSettings } from './sweep.ts';
import { traceRps, type WorkloadKind } from './workloads.ts';

/** The contract's race: these policies, in this order. */
export const RACE_POLICIES = ['kv-aware', 'round-robin', 'least-outstanding-tokens', 'llm-d', 'llm-d-precise', 'sglang', 'dynamo'] as const;
/**
 * Policies whose `native` admission is `none` or Expediter's own: kv-aware (Expediter's policy), the plain
 * load balancers and SGLang's router with its defaults (no limiter). Their `none` row stands for native.
 */
const NO_NATIVE_OF_THEIR_OWN = new Set(['kv-aware', 'round-robin', 'least-outstanding-tokens', 'sglang', 'random']);
export const SLO_ATTAINMENT_TARGET = 0.9;
export const RATE_TOLERANCE = 0.01;
/** Bracketing steps of 25 %: past the knee a run costs more (admission queues), so overshoot little. */
const BRACKET_STEP = 1.25;
/**
 * A chain whose start is predicted from its own first seed (pairedStart) brackets in steps of 10 %. On
 * synthetic attainment curves (the queue's 1/x² fall, ±1 % noise; `race-stats.ts` searches only) a start
 * within ±5-15 % of the crossing took 3.9-4.8 probes with 10 % steps against 5.0-5.5 with 25 %; past ±30 %
 * the two tie, so a bad prediction costs nothing. Chosen there, not on any race's seeds.
 */
const PAIRED_STEP = 1.1;
/**
 * The first contender's seeds that search from the pool's computed capacity, in parallel; its other seeds and
 * every other contender's first start from the mean of what these found. Two keep both threads of a 2-core
 * race busy at its start; the rest, from within the spread of seeds (±12 % on the seed mix), bracket in 10 %
 * steps instead of climbing from the computed capacity (9.4 runs a chain on the seed mix, 2.3× up).
 */
const OPENING_SEEDS = 2;
/** 1.25^16 ≈ 35: from the computed capacity down to 3 % of it, or up to 35×. */
const MAX_BRACKET_STEPS = 16;
export const OVERLOAD_TIMES = [2, 3] as const;
export const SEED_MIX_OVERLOAD_RPS = 5000;
const OVERLOAD_POLICY = 'kv-aware';
const OVERLOAD_ADMISSION: AdmissionMode = 'expediter';
/** Above any bisection depth. */
const OVERLOAD_PRIORITY = 1000;

export interface Contender {
  policy: string;
  admission: AdmissionMode;
}

export interface RacePlan {
  fleetName: string;
  /** kv-aware's prefix index in every run (routing.prefix_index, after --prefix-index). */
  prefixIndex: PrefixIndexMode;
  workload: WorkloadKind;
  workloadSpec: string;
  pool: SimPool;
  capacity: PoolCapacity;
  /** Every pool's capacity (the race runs one): the JSON's `pools`. */
  capacities: PoolCapacity[];
  contenders: Contender[];
  /** Race policies this build's schema lacks (not run). */
  missing: string[];
  seeds: number[];
  /** What the bisection varies: the load multiple (seed-mix) or the trace's speed. */
  axis: 'load' | 'speed';
  /** The rate the bisection starts at, on its axis: the pool's computed capacity. */
  start: number;
  args: SweepArgs;
}

/** One policy × admission × seed: its bisection's runs and what they found. */
export interface Chain {
  contender: Contender;
  seed: number;
  runs: RunOutput[];
  /** Highest rate that passed on the axis, null when none did; and that rate in requests/s. */
  lo: number | null;
  /** Where attainment crossed the target on the axis (lo when the bracket stayed open above); null when nothing passed. */
  axisCapacity: number | null;
  capacityRps: number;
  /** The bisection never failed (the rate is a lower bound). */
  openAbove: boolean;
  /** The best goodput of the chain's runs that met the attainment target (goodputPeaks in race-stats.ts says why). */
  peakGoodputRps: number;
  /** The best goodput of any of the chain's runs, past capacity included. */
  bestProbeGoodputRps: number;
}

export interface OverloadRun {
  seed: number;
  timesCapacity: number | null;
  rps: number | null;
  out: RunOutput;
  peakGoodputRps: number;
  bestProbeGoodputRps: number;
}

export interface RaceResult {
  chains: Chain[];
  overload: OverloadRun[];
  /** Every run, ordered by contender, seed, then rate. */
  runs: RunOutput[];
}

export function planRace(a: SweepArgs): RacePlan {
  const known = simPolicyNames();
  const wanted = a.policies ?? [...RACE_POLICIES];
  checkPolicies(wanted.filter((p) => a.policies !== null || known.includes(p)));
  const missing = wanted.filter((p) => !known.includes(p));
  const contenders: Contender[] = [];
  for (const policy of wanted) {
    if (missing.includes(policy)) continue;
    for (const admission of a.admissions) {
      if (admission === 'native' && NO_NATIVE_OF_THEIR_OWN.has(policy)) continue;
      contenders.push({ policy, admission });
    }
  }
  if (contenders.length === 0) throw new UsageError('--race: no policy and admission to run (kv-aware, round robin, least-outstanding-tokens and sglang have no native admission but none)');
  const { fleet, workload, pools, capacities } = planPools(a);
  const pool = pools[0]!;
  const capacity = capacities[0]!;
  const axis = workload.kind === 'seed-mix' ? 'load' : 'speed';
  const start = axis === 'load' ? 1 : capacity.capacityRps / traceRps(workload);
  return {
    fleetName: a.fleet, prefixIndex: fleet.config.routing.prefix_index, workload, workloadSpec: a.workload, pool, capacity, capacities, contenders, missing,
    seeds: Array.from({ length: a.seeds }, (_, i) => a.seed + i), axis, start, args: a,
  };
}

/** Four significant digits: rates in the JSON read as chosen, and the bisection's midpoints stay distinct. */
function round4(x: number): number {
  return Number(x.toPrecision(4));
}

export class RaceRunner {
  private readonly plan: RacePlan;
  private readonly pool: RunPool;
  private next = 0;
  private done = 0;
  private readonly log: (line: string) => void;
  /**
   * Policies raced under both `none` and `native` (llm-d, llm-d-precise, dynamo): a point of either chain
   * runs under `native`, and while its admission never acts (llm-d sheds only sheddable requests, and
   * every simulated tenant is standard tier; dynamo queues only while every worker is past its threshold)
   * that run is also `none`'s (noneTwin in run-output.ts). On Mooncake the two chains of these policies
   * were the same runs, three contenders of seventeen.
   */
  private readonly twinned: Set<string>;
  /** `native` runs by policy, seed and point; and the policy|seed pairs whose native admission has acted. */
  private readonly nativeRuns = new Map<string, Promise<RunOutput>>();
  private readonly nativeActed = new Set<string>();

  constructor(plan: RacePlan, threads: number, log: (line: string) => void = () => {}) {
    this.plan = plan;
    this.pool = new RunPool(threads);
    this.log = log;
    const has = (policy: string, admission: AdmissionMode): boolean => plan.contenders.some((c) => c.policy === policy && c.admission === admission);
    this.twinned = new Set(plan.contenders.filter((c) => c.admission === 'none' && has(c.policy, 'native')).map((c) => c.policy));
  }

  private spec(c: Contender, seed: number, point: { axis: 'load' | 'speed'; x: number } | { rps: number }): RunSpec {
    const p = this.plan;
    const a = p.args;
    let rate: Pick<RunSpec, 'load' | 'rps' | 'speed' | 'offeredRps' | 'traceSpeed'>;
    if ('rps' in point) rate = { load: null, rps: point.rps, speed: null, offeredRps: point.rps, traceSpeed: 1 };
    else if (point.axis === 'load') rate = { load: point.x, rps: null, speed: null, offeredRps: point.x * p.capacity.capacityRps, traceSpeed: 1 };
    else rate = { load: null, rps: null, speed: point.x, offeredRps: null, traceSpeed: point.x };
    return {
      index: this.next++, fleet: a.fleet, workload: a.workload, pool: p.pool.id, policy: c.policy, ...rate,
      minutes: a.minutes, gateways: a.gateways, seed, retryShed: a.retryShed, kills: [], restarts: [],
      admission: c.admission, ...runSettings(a),
    };
  }

  /**
   * Priority: a chain's later probes go first (depth-first), and overload runs before any probe, so chains
   * finish one after another and the long overload runs start early instead of forming the race's tail.
   */
  private async runOne(spec: RunSpec, priority: number): Promise<RunOutput> {
    const out = await this.pool.submit(spec, priority);
    this.done++;
    this.logRun(out, '');
    return out;
  }

  private logRun(out: RunOutput, note: string): void {
    const j = out.json;
    const at = j.load !== null ? `${j.load}×` : j.speed !== null ? `speed ${j.speed}` : `${j.rps} rps`;
    this.log(`[${this.done} runs] ${j.policy}/${j.admission} seed ${j.seed} ${at}: offered ${j.offered_rps} rps, SLO met ${(j.slo_attainment * 100).toFixed(1)} %, ${(out.cpuMs / 1000).toFixed(1)} s CPU${note}`);
  }

  /**
   * One point of a chain. For a twinned policy under `none` or `native` the native run is made (once, for
   * whichever chain asks first) and `none` takes its twin while the native admission has not acted; after
   * it has acted at some point of a seed, that seed's `none` points run on their own.
   */
  private async probe(c: Contender, seed: number, point: { axis: 'load' | 'speed'; x: number } | { rps: number }, priority: number): Promise<RunOutput> {
    const pair = `${c.policy}|${seed}`;
    if (c.admission === 'expediter' || !this.twinned.has(c.policy) || (c.admission === 'none' && this.nativeActed.has(pair))) {
      return this.runOne(this.spec(c, seed, point), priority);
    }
    const key = `${pair}|${'rps' in point ? `rps ${point.rps}` : point.x}`;
    let native = this.nativeRuns.get(key);
    if (native === undefined) {
      native = this.runOne(this.spec({ policy: c.policy, admission: 'native' }, seed, point), priority).then((out) => {
        if (out.nativeInterventions !== 0) this.nativeActed.add(pair);
        return out;
      });
      this.nativeRuns.set(key, native);
    }
    const out = await native;
    if (c.admission === 'native') return out;
    const spec = this.spec(c, seed, point);
    const twin = noneTwin(out, spec);
    if (twin === null) return this.runOne(spec, priority);
    this.logRun(twin, ' (the native run: its admission never acted)');
    return twin;
  }

  private async chain(c: Contender, seed: number, start: number, step = BRACKET_STEP): Promise<Chain> {
    const p = this.plan;
    const runs: RunOutput[] = [];
    const byRate = new Map<number, RunOutput>();
    const r = await bisectCapacity(async (x) => {
      const out = await this.probe(c, seed, { axis: p.axis, x: round4(x) }, runs.length);
      runs.push(out);
      byRate.set(x, out);
      return out.json.slo_attainment;
    }, { start, step, tolerance: RATE_TOLERANCE, maxBracketSteps: MAX_BRACKET_STEPS, target: SLO_ATTAINMENT_TARGET });
    // Seed-mix: the rate the workload was generated at (load × the pool's computed capacity), the same for
    // every policy at that point; what a window of it happens to offer varies with its bursts. A trace: the
    // rate the compressed trace offered in the measured window (the same requests for every policy). The
    // capacity is where attainment crosses the target between the last passing and first failing rates.
    const lo = r.lo === null ? null : byRate.get(r.lo)!.json;
    const hi = r.hi === null ? null : byRate.get(r.hi)!.json;
    const rpsOf = (j: RunOutput['json']): number => (j.load !== null ? j.load * p.capacity.capacityRps : j.offered_rps);
    const capacityRps = lo === null ? 0 : hi === null ? rpsOf(lo) : crossing(rpsOf(lo), lo.slo_attainment, rpsOf(hi), hi.slo_attainment, SLO_ATTAINMENT_TARGET);
    const { peak, bestProbe } = goodputPeaks(runs.map((o) => o.json), SLO_ATTAINMENT_TARGET);
    const axisCapacity = r.lo === null ? null : r.hi === null ? r.lo : crossing(r.lo, r.loAttainment, r.hi, r.hiAttainment, SLO_ATTAINMENT_TARGET);
    return { contender: c, seed, runs, lo: r.lo, axisCapacity, capacityRps, openAbove: r.hi === null, peakGoodputRps: peak, bestProbeGoodputRps: bestProbe };
  }

  private async overload(ch: Chain): Promise<OverloadRun[]> {
    const p = this.plan;
    const jobs: Array<Promise<OverloadRun>> = [];
    const of = (timesCapacity: number | null, rps: number | null) => (out: RunOutput): OverloadRun =>
      ({ seed: ch.seed, timesCapacity, rps, out, peakGoodputRps: ch.peakGoodputRps, bestProbeGoodputRps: ch.bestProbeGoodputRps });
    if (ch.lo !== null) {
      for (const times of OVERLOAD_TIMES) {
        jobs.push(this.runOne(this.spec(ch.contender, ch.seed, { axis: p.axis, x: round4(times * ch.lo) }), OVERLOAD_PRIORITY).then(of(times, null)));
      }
    }
    if (p.workload.kind === 'seed-mix') {
      jobs.push(this.runOne(this.spec(ch.contender, ch.seed, { rps: SEED_MIX_OVERLOAD_RPS }), OVERLOAD_PRIORITY).then(of(null, SEED_MIX_OVERLOAD_RPS)));
    }
    return Promise.all(jobs);
  }

  /**
   * Where each chain's search starts, decided by results only (so the same flags give the same JSON
   * whatever finishes first). The first contender on its first OPENING_SEEDS seeds from the pool's computed
   * capacity, on the rest from the mean capacity those found (the hint) in steps of PAIRED_STEP. Every
   * other contender has a reference (startReference): under Expediter's admission kv-aware under it, once
   * that is raced, else the first contender. A contender's first seed starts from its reference's capacity
   * on that seed (from the hint, for a reference that is the first contender), and its later seeds from its
   * own first seed's capacity scaled by how its reference's moved between those seeds (pairedStart), both in
   * steps of PAIRED_STEP. The computed capacity assumes no
   * queueing and can be several times the SLO capacity (four times on Azure's code trace): starting every
   * chain there spent most of a race's CPU on runs far past capacity. A seed moves every contender's
   * capacity alike (its window, its engines' bias), and most alike among contenders under one admission:
   * on the seed mix kv-aware's capacity under `none` predicted its own under Expediter's admission on a later
   * seed within 1-10 %, while the paired ratios of the contenders under that admission spread by 1-3 %.
   */
  async race(): Promise<RaceResult> {
    const p = this.plan;
    const overload: OverloadRun[] = [];
    try {
      const finish = async (ch: Chain): Promise<Chain> => {
        if (ch.contender.policy === OVERLOAD_POLICY && ch.contender.admission === OVERLOAD_ADMISSION) overload.push(...(await this.overload(ch)));
        return ch;
      };
      const [c0, ...rest] = p.contenders;
      // Raw chains (per seed) for the starts they inform; finished (the overload runs on kv-aware/expediter's) apart.
      const raw = new Map<Contender, Array<Promise<Chain>>>();
      const opening = p.seeds.slice(0, OPENING_SEEDS).map((seed) => this.chain(c0!, seed, p.start));
      const hint = Promise.all(opening).then((chs) => {
        const found = chs.map((ch) => ch.lo).filter((x): x is number => x !== null);
        return found.length > 0 ? found.reduce((a, b) => a + b, 0) / found.length : p.start;
      });
      const firsts = [...opening, ...p.seeds.slice(OPENING_SEEDS).map((seed) => hint.then((h) => this.chain(c0!, seed, round4(h), h === p.start ? BRACKET_STEP : PAIRED_STEP)))];
      raw.set(c0!, firsts);
      // References are raced before the contenders that lean on them (startReference returns an earlier one).
      for (const c of rest) {
        const ref = raw.get(startReference(c, p.contenders))!;
        const head = ref === firsts
          ? hint.then((h) => this.chain(c, p.seeds[0]!, h))
          : ref[0]!.then((r) => (r.axisCapacity === null ? hint.then((h) => this.chain(c, p.seeds[0]!, h)) : this.chain(c, p.seeds[0]!, round4(r.axisCapacity), PAIRED_STEP)));
        const tail = p.seeds.slice(1).map((seed, i) => Promise.all([head, ref[0]!, ref[i + 1]!]).then(([own, ref0, refS]) => {
          const start = pairedStart(own.axisCapacity, ref0.axisCapacity, refS.axisCapacity);
          return start === null ? hint.then((h) => this.chain(c, seed, own.lo ?? h)) : this.chain(c, seed, round4(start), PAIRED_STEP);
        }));
        raw.set(c, [head, ...tail]);
      }
      const others = rest.flatMap((c) => raw.get(c)!.map((x) => x.then(finish)));
      const chains = await Promise.all([...firsts.map((x) => x.then(finish)), ...others]);
      const order = (o: RunOutput): [number, number, number] => {
        const ci = p.contenders.findIndex((c) => c.policy === o.json.policy && c.admission === o.json.admission);
        return [ci, o.json.seed, o.json.load ?? o.json.speed ?? o.json.rps ?? 0];
      };
      const runs = [...chains.flatMap((c) => c.runs), ...overload.map((o) => o.out)].sort((x, y) => {
        const a = order(x);
        const b = order(y);
        return a[0] - b[0] || a[1] - b[1] || a[2] - b[2] || (x.json.rps ?? 0) - (y.json.rps ?? 0);
      });
      overload.sort((x, y) => x.seed - y.seed || (x.timesCapacity ?? Infinity) - (y.timesCapacity ?? Infinity));
      return { chains, overload, runs };
    } finally {
      await this.pool.close();
    }
  }
}

/**
 * The contender whose capacities a contender's searches start from (RaceRunner.race): kv-aware under
 * Expediter's admission for every other contender under that admission, when it is raced and comes earlier
 * in the plan (so its chains exist first); otherwise the plan's first contender.
 */
export function startReference(c: Contender, contenders: readonly Contender[]): Contender {
  const at = contenders.indexOf(c);
  if (c.admission === 'expediter') {
    const i = contenders.findIndex((x) => x.policy === 'kv-aware' && x.admission === 'expediter');
    if (i > 0 && i < at) return contenders[i]!;
  }
  return contenders[0]!;
}

/** Plans and runs a race on `threads` worker threads; `log` hears of each run as it ends. */
export async function runRace(plan: RacePlan, threads: number, log?: (line: string) => void): Promise<RaceResult> {
  return new RaceRunner(plan, threads, log).race();
}
