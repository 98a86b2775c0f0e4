// A sweep: which runs the flags ask for (policy × pool × load point), each pool's capacity on the workload's
// mix, and the runs spread over worker threads (each run is independent and single-threaded, so two
// threads on two cores halve a sweep's wall time). Results come back in plan order whatever finished first.
// Thread: main. Setup and orchestration only.
import { UsageError, type SweepArgs } from './args.ts';
import { poolCapacity, type PoolCapacity } from './capacity.ts';
import { loadFleet, withKvScale, withPrefixIndex, type SimFleet, type SimPool } from './fleet.ts';
import { policyNames, simPolicyNames } from './policies.ts';
import { RunPool } from './run-pool.ts';
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

/**
 * The fleet, workload, pools and each pool's capacity the flags ask for. A race, like a trace, runs one pool
 * (--pool, else the 8B pool); a seed-mix sweep runs every pool unless --pool.
 */
export function planPools(a: SweepArgs): Omit<SweepPlan, 'specs'> {
  const fleet = withPrefixIndex(loadFleet(a.fleet), a.prefixIndex);
  const wk = parseWorkload(a.workload);
  let pools: SimPool[];
  if (a.pool !== null) {
    const p = fleet.pools.find((x) => x.id === a.pool);
    if (!p) throw new UsageError(`--pool ${a.pool}: the fleet has ${fleet.pools.map((x) => x.id).join(', ')}`);
    pools = [p];
  } else {
    pools = wk.kind === 'seed-mix' && !a.race ? [...fleet.pools] : [defaultTracePool(fleet)];
  }
  pools = pools.map((p) => withKvScale(p, a.kvScale));
  const headroom = fleet.config.admission.headroom_ratio;
  const capacities = pools.map((pool) => {
    // Seeded by the pool's place in the fleet, so --pool gives the same capacity as a whole-fleet sweep.
    const sample = wk.kind === 'seed-mix'
      ? makeWorkload(wk, pool, { rps: CAPACITY_SAMPLE_RPS, speed: 1, durationMs: CAPACITY_SAMPLE_MS, seed: a.seed * 1000 + 500 + fleet.pools.findIndex((x) => x.id === pool.id), traceSeed: a.seed, maxTokens: a.maxTokens })
      : makeWorkload(wk, pool, { rps: 0, speed: 1, durationMs: Infinity, seed: a.seed, traceSeed: a.seed, maxTokens: a.maxTokens });
    return poolCapacity(pool, sample, headroom);
  });
  return { fleet, workload: wk, pools, capacities };
}

/** What every run of a sweep or race shares from the flags: the engines, the hop, the index, the clients' caps. */
export function runSettings(a: SweepArgs): Pick<RunSpec, 'engineErrorPct' | 'stepJitterPct' | 'engineBiasPct' | 'batchPadding' | 'maxTokens' | 'kvScale' | 'dispatchMs' | 'prefixIndex'> {
  return {
    engineErrorPct: a.engineErrorPct, stepJitterPct: a.stepJitterPct, engineBiasPct: a.engineBiasPct, batchPadding: a.batchPadding,
    maxTokens: a.maxTokens, kvScale: a.kvScale, dispatchMs: a.dispatchMs, prefixIndex: a.prefixIndex,
  };
}

/** Throws a UsageError naming the first policy the simulator does not have. */
export function checkPolicies(policies: readonly string[]): void {
  const known = simPolicyNames();
  for (const p of policies) if (!known.includes(p)) throw new UsageError(`--policies: unknown ${p}; the simulator offers ${known.join(', ')}`);
}

export function planSweep(a: SweepArgs): SweepPlan {
  const policies = a.policies ?? policyNames();
  checkPolicies(policies);
  const { fleet, workload: wk, pools, capacities } = planPools(a);
  for (const f of [...a.kills, ...a.restarts]) {
    if (!fleet.pools.some((p) => p.replicas.some((r) => r.id === f.replica))) throw new UsageError(`no replica ${f.replica} in the fleet`);
  }

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
            admission, ...runSettings(a),
          });
        }
      }
    }
  });
  return { fleet, workload: wk, pools, capacities, specs };
}

/** Runs every spec, `threads` at a time (inline when 1). Rejects with the first run's error. */
export async function runSpecs(specs: readonly RunSpec[], threads: number): Promise<RunOutput[]> {
  const pool = new RunPool(Math.min(threads, specs.length));
  try {
    const outs = await Promise.all(specs.map((s) => pool.submit(s)));
    const results: RunOutput[] = new Array(specs.length);
    for (const o of outs) results[o.index] = o;
    return results;
  } finally {
    await pool.close();
  }
}
