// A sweep: which runs the flags ask for (policy × pool × load point), each pool's capacity on the workload's
// mix, and the runs spread over worker threads (each run is independent and single-threaded, so two
// threads on two cores halve a sweep's wall time). Results come back in plan order whatever finished first.
// Thread: main. Setup and orchestration only.
import { spawnWorker } from '../../src/util/spawn-worker.ts';
import { UsageError, type SweepArgs } from './args.ts';
import { poolCapacity, type PoolCapacity } from './capacity.ts';
import { loadFleet, withKvScale, type SimFleet, type SimPool } from './fleet.ts';
import { policyNames, simPolicyNames } from './policies.ts';
import { executeRun } from './run-output.ts';
import type { RunOutput, RunSpec } from './run-types.ts';
import { makeWorkload, parseWorkload, traceRps, type WorkloadKind } from './workloads.ts';

/** Seed-mix sample the capacity is worked out on: long enough for the tails to show (~15k requests). */
const CAPACITY_SAMPLE_RPS = 50;
const CAPACITY_SAMPLE_MS = 300_000;

export interface SweepPlan {
  fleet: SimFleet;
  workload: WorkloadKind;
  pools: SimPool[];
  capacities: PoolCapacity[];
  specs: RunSpec[];
}

function defaultTracePool(fleet: SimFleet): SimPool {
  return fleet.pools.find((p) => p.id === '8b') ??
    fleet.pools.find((p) => p.profile === 'llama-8b-a100' && p.adapters.length === 0) ?? fleet.pools[0]!;
}

export function planSweep(a: SweepArgs): SweepPlan {
  const fleet = loadFleet(a.fleet);
  const wk = parseWorkload(a.workload);
  let pools: SimPool[];
  if (a.pool !== null) {
    const p = fleet.pools.find((x) => x.id === a.pool);
    if (!p) throw new UsageError(`--pool ${a.pool}: the fleet has ${fleet.pools.map((x) => x.id).join(', ')}`);
    pools = [p];
  } else {
    pools = wk.kind === 'seed-mix' ? [...fleet.pools] : [defaultTracePool(fleet)];
  }
  pools = pools.map((p) => withKvScale(p, a.kvScale));
  const known = simPolicyNames();
  const policies = a.policies ?? policyNames();
  for (const p of policies) if (!known.includes(p)) throw new UsageError(`--policies: unknown ${p}; the simulator offers ${known.join(', ')}`);
  for (const f of [...a.kills, ...a.restarts]) {
    if (!fleet.pools.some((p) => p.replicas.some((r) => r.id === f.replica))) throw new UsageError(`no replica ${f.replica} in the fleet`);
  }

  const headroom = fleet.config.admission.headroom_ratio;
  const capacities = pools.map((pool) => {
    // Seeded by the pool's place in the fleet, so --pool gives the same capacity as a whole-fleet sweep.
    const sample = wk.kind === 'seed-mix'
      ? makeWorkload(wk, pool, { rps: CAPACITY_SAMPLE_RPS, speed: 1, durationMs: CAPACITY_SAMPLE_MS, seed: a.seed * 1000 + 500 + fleet.pools.findIndex((x) => x.id === pool.id) })
      : makeWorkload(wk, pool, { rps: 0, speed: 1, durationMs: Infinity, seed: a.seed });
    return poolCapacity(pool, sample, headroom);
  });

  const specs: RunSpec[] = [];
  pools.forEach((pool, pi) => {
    const cap = capacities[pi]!.capacityRps;
    type Point = Pick<RunSpec, 'load' | 'rps' | 'speed' | 'offeredRps' | 'traceSpeed'>;
    const points: Point[] = [];
    if (wk.kind === 'seed-mix') {
      if (a.rps) for (const r of a.rps) points.push({ load: null, rps: r, speed: null, offeredRps: r, traceSpeed: 1 });
      else for (const l of a.load ?? [1]) points.push({ load: l, rps: null, speed: null, offeredRps: l * cap, traceSpeed: 1 });
    } else if (a.load) {
      const native = traceRps(wk);
      for (const l of a.load) points.push({ load: l, rps: null, speed: null, offeredRps: null, traceSpeed: (l * cap) / native });
    } else {
      for (const s of a.speed ?? [1]) points.push({ load: null, rps: null, speed: s, offeredRps: null, traceSpeed: s });
    }
    const inPool = (f: { replica: string }): boolean => pool.replicas.some((r) => r.id === f.replica);
    for (const policy of policies) {
      for (const admission of a.admissions) {
        for (const pt of points) {
          specs.push({
            index: specs.length, fleet: a.fleet, workload: a.workload, pool: pool.id, policy, ...pt,
            minutes: a.minutes, gateways: a.gateways, seed: a.seed, retryShed: a.retryShed,
            kills: a.kills.filter(inPool), restarts: a.restarts.filter(inPool),
            admission, engineErrorPct: a.engineErrorPct, stepJitterPct: a.stepJitterPct, kvScale: a.kvScale,
          });
        }
      }
    }
  });
  return { fleet, workload: wk, pools, capacities, specs };
}

type WorkerReply = { ok: true; out: RunOutput } | { ok: false; index: number; error: string };

/** Runs every spec, `threads` at a time (inline when 1). Rejects with the first run's error. */
export async function runSpecs(specs: readonly RunSpec[], threads: number): Promise<RunOutput[]> {
  const results: RunOutput[] = new Array(specs.length);
  if (threads <= 1 || specs.length <= 1) {
    for (const s of specs) results[s.index] = executeRun(s);
    return results;
  }
  let next = 0;
  const workers = Array.from({ length: Math.min(threads, specs.length) }, () => spawnWorker(new URL('./sweep-worker.ts', import.meta.url)));
  try {
    await Promise.all(workers.map((w) => new Promise<void>((resolve, reject) => {
      const feed = (): void => {
        if (next >= specs.length) {
          resolve();
          return;
        }
        w.postMessage(specs[next++]);
      };
      w.on('message', (m: WorkerReply) => {
        if (!m.ok) {
          reject(new Error(`run ${m.index} failed: ${m.error}`));
          return;
        }
        results[m.out.index] = m.out;
        feed();
      });
      w.on('error', reject);
      w.on('exit', (code) => {
        if (next < specs.length || code !== 0) reject(new Error(`sweep worker exited with code ${code}`));
      });
      feed();
    })));
  } finally {
    await Promise.all(workers.map((w) => w.terminate()));
  }
  return results;
}
