// The simulator's flags (`npm run bench -- sim ...`), parsed into a SweepArgs. Bad input is a UsageError
// whose message says which flag and why; the scenario prints it with the usage and exits 2.
// Thread: main. Setup only.
import type { FaultSpec } from './run-types.ts';

export class UsageError extends Error {
  override name = 'UsageError';
}

export const USAGE = `usage: npm run bench -- sim [--fleet seed|demo|PATH] [--workload seed-mix|mooncake:PATH|azure:PATH]
  [--pool ID] [--policies LIST] [--load LIST | --rps LIST | --speed LIST] [--minutes N] [--gateways N]
  [--seed N] [--retry-shed] [--kill REPLICA@S]... [--restart REPLICA@S]... [--json PATH] [--plot PATH.svg]
  [--threads N]`;

export interface SweepArgs {
  fleet: string;
  workload: string;
  pool: string | null;
  policies: string[] | null;
  load: number[] | null;
  rps: number[] | null;
  speed: number[] | null;
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

function fault(flag: string, v: string): FaultSpec {
  const m = /^([^@\s]+)@(\d+(?:\.\d+)?)$/.exec(v);
  if (!m) throw new UsageError(`${flag} takes REPLICA@SECONDS (e.g. 8b-3@30), got ${v}`);
  return { replica: m[1]!, atS: Number(m[2]) };
}

export function parseArgs(argv: readonly string[]): SweepArgs {
  const a: SweepArgs = {
    fleet: 'seed', workload: 'seed-mix', pool: null, policies: null, load: null, rps: null, speed: null,
    minutes: 2, gateways: 1, seed: 1, retryShed: false, kills: [], restarts: [], json: null, plot: null, threads: null,
  };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i]!;
    if (flag === '--retry-shed') {
      a.retryShed = true;
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
      case '--minutes': a.minutes = positive(name, value(), false); break;
      case '--gateways': a.gateways = positive(name, value(), true); break;
      case '--seed': a.seed = positive(name, value(), true); break;
      case '--kill': a.kills.push(fault(name, value())); break;
      case '--restart': a.restarts.push(fault(name, value())); break;
      case '--json': a.json = value(); break;
      case '--plot': a.plot = value(); break;
      case '--threads': a.threads = positive(name, value(), true); break;
      default: throw new UsageError(`unknown flag ${flag}`);
    }
  }
  const sweeps = [a.load, a.rps, a.speed].filter((x) => x !== null).length;
  if (sweeps > 1) throw new UsageError('give one of --load, --rps, --speed');
  if (a.speed && a.workload === 'seed-mix') throw new UsageError('--speed applies to traces; use --load or --rps with seed-mix');
  if (a.rps && a.workload !== 'seed-mix') throw new UsageError('--rps applies to seed-mix; a trace keeps its own arrival times (use --speed or --load)');
  if (a.policies?.length === 0) throw new UsageError('--policies is empty');
  if (a.plot !== null && !a.plot.endsWith('.svg')) throw new UsageError('--plot takes a PATH.svg');
  return a;
}
