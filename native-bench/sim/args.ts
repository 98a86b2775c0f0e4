// The simulator's flags (`npm run bench -- sim ...`), parsed into a SweepArgs. Bad input is a UsageError
// whose message says which flag and why; the scenario prints it with the usage and exits 2.
// Thread: main. Setup only.
import { ADMISSION_MODES, PREFIX_INDEX_MODES, type AdmissionMode, type FaultSpec, type PrefixIndexMode } from './run-types.ts';
import { MAX_TOKENS_MODES, type MaxTokensMode } from './traces.ts';

export class UsageError extends Error {
  override name = 'UsageError';
}

export const USAGE = `usage: npm run bench -- sim [--fleet seed|demo|PATH] [--workload seed-mix|mooncake:PATH|azure:PATH]
  [--pool ID] [--policies LIST] [--load LIST | --rps LIST | --speed LIST] [--minutes N] [--gateways N]
  [--seed N] [--retry-shed] [--kill REPLICA@S]... [--restart REPLICA@S]... [--json PATH] [--plot PATH.svg]
  [--threads N] [--admission none,native,expediter] [--engine-bias PCT] [--engine-error PCT] [--step-jitter PCT]
  [--no-batch-padding] [--kv-scale F] [--dispatch-ms MS] [--prefix-index approximate|events]
  [--max-tokens caps|recorded] [--race [--seeds N]]`;

/**
 * Engine perturbation a race runs with unless told otherwise (outside a race the engines are the profiles'):
 * the fleet's nominal figures off by up to 20 % for every replica at once (a shared draw per parameter and
 * seed), each replica a few percent off that (replicas of one GPU type differ by a few percent), and each
 * step ±10 %.
 */
export const RACE_ENGINE_BIAS_PCT = 20;
export const RACE_ENGINE_ERROR_PCT = 3;
export const RACE_STEP_JITTER_PCT = 10;
/**
 * Gateway → engine time of a dispatched request in a race (ms): the network hop, vLLM's API server parsing,
 * templating and tokenizing the prompt, and the ZMQ hop to the engine core, which picks new requests up only
 * between steps. A couple of ms in one cluster; with 0 a request dispatched the instant a stream ends would
 * join the step that starts then, which a real engine has already begun.
 */
export const RACE_DISPATCH_MS = 2;
/**
 * kv-aware's prefix index in a race: the simulated engines publish KV events (dynamo and llm-d-precise read
 * them, as upstream), so Expediter reads them too (routing.prefix_index: events), as it does beside a vLLM
 * started with --kv-events-config. `--prefix-index approximate` races it without them.
 */
export const RACE_PREFIX_INDEX: PrefixIndexMode = 'events';
export const RACE_SEEDS = 5;
/**
 * The race's first seed (seeds 101-105 by default). Constants in src/gpu-time, src/admission and src/router
 * are tuned on seeds 1-5 (native-bench/sim/README.md, "Tuning and judging"): a race reports on seeds none of
 * the tuning saw.
 */
export const RACE_FIRST_SEED = 101;
/** Simulated minutes per run in a race: traces are slower (long prompts) and need longer to show their knee. */
export const RACE_MINUTES_TRACE = 8;
export const RACE_MINUTES_SEED_MIX = 2;

export interface SweepArgs {
  fleet: string;
  workload: string;
  pool: string | null;
  policies: string[] | null;
  load: number[] | null;
  rps: number[] | null;
  speed: number[] | null;
  /** Simulated minutes per run (resolved: the flag, else 2, or the race's default for the workload). */
  minutes: number;
  gateways: number;
  seed: number;
  retryShed: boolean;
  kills: FaultSpec[];
  restarts: FaultSpec[];
  json: string | null;
  plot: string | null;
  /** Worker threads for the sweep (default: 2, or 1 for a single run). */
  threads: number | null;
  /** `--race`: the bisection of every policy's SLO capacity (race.ts) instead of a sweep. */
  race: boolean;
  /** Admission modes each policy runs under (default expediter; a race: both). */
  admissions: AdmissionMode[];
  engineErrorPct: number;
  stepJitterPct: number;
  /** Shared draw per step-time parameter and seed (default 0; RACE_ENGINE_BIAS_PCT in a race). */
  engineBiasPct: number;
  /** Decode batches costed as vLLM's CUDA-graph batch (default on; --no-batch-padding turns it off). */
  batchPadding: boolean;
  /** A trace's max_tokens: clients' caps (default) or the recorded output length (hindsight; not in a race). */
  maxTokens: MaxTokensMode;
  kvScale: number;
  /** Gateway → engine latency of each dispatch, ms (default 0; RACE_DISPATCH_MS in a race). */
  dispatchMs: number;
  /** kv-aware's prefix index, overriding the fleet config's routing.prefix_index (null: the config's; a race: RACE_PREFIX_INDEX). */
  prefixIndex: PrefixIndexMode | null;
  /** Seeds --seed, --seed+1, … (a race; default RACE_SEEDS). */
  seeds: number;
}

function numberList(flag: string, v: string): number[] {
  const out = v.split(',').map((s) => Number(s.trim()));
  if (out.length === 0 || out.some((x) => !Number.isFinite(x) || x <= 0)) throw new UsageError(`${flag} takes a comma-separated list of positive numbers, got ${v}`);
  return out;
}

function positive(flag: string, v: string, integer: boolean): number {
  const x = Number(v);
  if (!Number.isFinite(x) || x <= 0 || (integer && !Number.isInteger(x))) throw new UsageError(`${flag} takes a positive ${integer ? 'integer' : 'number'}, got ${v}`);
  return x;
}

function percent(flag: string, v: string): number {
  const x = Number(v);
  if (!Number.isFinite(x) || x < 0 || x >= 100) throw new UsageError(`${flag} takes a percentage in [0, 100), got ${v}`);
  return x;
}

function nonNegative(flag: string, v: string): number {
  const x = Number(v);
  if (v.trim() === '' || !Number.isFinite(x) || x < 0) throw new UsageError(`${flag} takes a number ≥ 0, got ${v}`);
  return x;
}

function admissions(flag: string, v: string): AdmissionMode[] {
  const out = v.split(',').map((s) => s.trim()).filter((s) => s !== '');
  if (out.length === 0) throw new UsageError(`${flag} is empty`);
  for (const m of out) if (!(ADMISSION_MODES as readonly string[]).includes(m)) throw new UsageError(`${flag}: unknown ${m}; give ${ADMISSION_MODES.join(', ')}`);
  return [...new Set(out)] as AdmissionMode[];
}

function prefixIndexMode(flag: string, v: string): PrefixIndexMode {
  if (!(PREFIX_INDEX_MODES as readonly string[]).includes(v)) throw new UsageError(`${flag} takes ${PREFIX_INDEX_MODES.join(' or ')}, got ${v}`);
  return v as PrefixIndexMode;
}

function maxTokensMode(flag: string, v: string): MaxTokensMode {
  if (!(MAX_TOKENS_MODES as readonly string[]).includes(v)) throw new UsageError(`${flag} takes ${MAX_TOKENS_MODES.join(' or ')}, got ${v}`);
  return v as MaxTokensMode;
}

function fault(flag: string, v: string): FaultSpec {
  const m = /^([^@\s]+)@(\d+(?:\.\d+)?)$/.exec(v);
  if (!m) throw new UsageError(`${flag} takes REPLICA@SECONDS (e.g. 8b-3@30), got ${v}`);
  return { replica: m[1]!, atS: Number(m[2]) };
}

export function parseArgs(argv: readonly string[]): SweepArgs {
  const a: SweepArgs = {
    fleet: 'seed', workload: 'seed-mix', pool: null, policies: null, load: null, rps: null, speed: null,
    minutes: 2, gateways: 1, seed: 1, retryShed: false, kills: [], restarts: [], json: null, plot: null, threads: null,
    race: false, admissions: ['expediter'], engineErrorPct: 0, stepJitterPct: 0, engineBiasPct: 0, batchPadding: true, maxTokens: 'caps',
    kvScale: 1, dispatchMs: 0, prefixIndex: null, seeds: 1,
  };
  let seed: number | null = null;
  let engineBias: number | null = null;
  let minutes: number | null = null;
  let admissionList: AdmissionMode[] | null = null;
  let engineError: number | null = null;
  let stepJitter: number | null = null;
  let dispatchMs: number | null = null;
  let prefixIndex: PrefixIndexMode | null = null;
  let seeds: number | null = null;
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i]!;
    if (flag === '--retry-shed') {
      a.retryShed = true;
      continue;
    }
    if (flag === '--race') {
      a.race = true;
      continue;
    }
    if (flag === '--no-batch-padding') {
      a.batchPadding = false;
      continue;
    }
    const eq = flag.indexOf('=');
    const name = eq > 0 ? flag.slice(0, eq) : flag;
    const value = (): string => {
      if (eq > 0) return flag.slice(eq + 1);
      const v = argv[++i];
      if (v === undefined) throw new UsageError(`${name} needs a value`);
      return v;
    };
    switch (name) {
      case '--fleet': a.fleet = value(); break;
      case '--workload': a.workload = value(); break;
      case '--pool': a.pool = value(); break;
      case '--policies': a.policies = value().split(',').map((s) => s.trim()).filter((s) => s !== ''); break;
      case '--load': a.load = numberList(name, value()); break;
      case '--rps': a.rps = numberList(name, value()); break;
      case '--speed': a.speed = numberList(name, value()); break;
      case '--minutes': minutes = positive(name, value(), false); break;
      case '--gateways': a.gateways = positive(name, value(), true); break;
      case '--seed': seed = positive(name, value(), true); break;
      case '--kill': a.kills.push(fault(name, value())); break;
      case '--restart': a.restarts.push(fault(name, value())); break;
      case '--json': a.json = value(); break;
      case '--plot': a.plot = value(); break;
      case '--threads': a.threads = positive(name, value(), true); break;
      case '--admission': admissionList = admissions(name, value()); break;
      case '--engine-error': engineError = percent(name, value()); break;
      case '--engine-bias': engineBias = percent(name, value()); break;
      case '--max-tokens': a.maxTokens = maxTokensMode(name, value()); break;
      case '--step-jitter': stepJitter = percent(name, value()); break;
      case '--kv-scale': a.kvScale = positive(name, value(), false); break;
      case '--dispatch-ms': dispatchMs = nonNegative(name, value()); break;
      case '--prefix-index': prefixIndex = prefixIndexMode(name, value()); break;
      case '--seeds': seeds = positive(name, value(), true); break;
      default: throw new UsageError(`unknown flag ${flag}`);
    }
  }
  const sweeps = [a.load, a.rps, a.speed].filter((x) => x !== null).length;
  if (sweeps > 1) throw new UsageError('give one of --load, --rps, --speed');
  if (a.speed && a.workload === 'seed-mix') throw new UsageError('--speed applies to traces; use --load or --rps with seed-mix');
  if (a.rps && a.workload !== 'seed-mix') throw new UsageError('--rps applies to seed-mix; a trace keeps its own arrival times (use --speed or --load)');
  if (a.policies?.length === 0) throw new UsageError('--policies is empty');
  if (a.plot !== null && !a.plot.endsWith('.svg')) throw new UsageError('--plot takes a PATH.svg');
  if (a.race) {
    if (sweeps > 0) throw new UsageError('--race finds each policy\'s SLO capacity itself: drop --load, --rps and --speed');
    if (a.kills.length > 0 || a.restarts.length > 0) throw new UsageError('--race runs without faults: drop --kill and --restart');
    if (a.plot !== null) throw new UsageError('--plot applies to sweeps, not to --race');
    if (a.maxTokens === 'recorded') throw new UsageError('--max-tokens recorded hands the gateway each reply\'s length: it is for sweeps, never a race');
  } else if (seeds !== null) {
    throw new UsageError('--seeds applies to --race (a sweep runs --seed)');
  }
  a.minutes = minutes ?? (a.race ? (a.workload === 'seed-mix' ? RACE_MINUTES_SEED_MIX : RACE_MINUTES_TRACE) : 2);
  a.admissions = admissionList ?? (a.race ? [...ADMISSION_MODES] : ['expediter']);
  a.seed = seed ?? (a.race ? RACE_FIRST_SEED : 1);
  a.engineErrorPct = engineError ?? (a.race ? RACE_ENGINE_ERROR_PCT : 0);
  a.engineBiasPct = engineBias ?? (a.race ? RACE_ENGINE_BIAS_PCT : 0);
  a.stepJitterPct = stepJitter ?? (a.race ? RACE_STEP_JITTER_PCT : 0);
  a.dispatchMs = dispatchMs ?? (a.race ? RACE_DISPATCH_MS : 0);
  a.prefixIndex = prefixIndex ?? (a.race ? RACE_PREFIX_INDEX : null);
  a.seeds = seeds ?? (a.race ? RACE_SEEDS : 1);
  return a;
}
