// `npm run bench -- sim`: the fleet simulator (native-bench/sim/README.md). Prints each pool's capacity and
// one table per pool (policy × load point), writes --json and --plot when asked; the runner's own table
// is the cost of each run (simulated requests, thread time, time per simulated request).
import { availableParallelism } from 'node:os';
import { parseArgs, USAGE, UsageError, type SweepArgs } from '../sim/args.ts';
import { sweepJson, writeSweepJson } from '../sim/json.ts';
import { sweepSvg, writeSvg } from '../sim/plot.ts';
import { capacityTable, poolTables } from '../sim/report.ts';
import { planSweep, runSpecs } from '../sim/sweep.ts';
import { planRace, runRace } from '../sim/race.ts';
import { raceJson, raceTables } from '../sim/race-report.ts';
import type { BenchResult, BenchScenario } from '../types.ts';

/** `--race`: each policy's SLO capacity (native-bench/sim/race.ts); the runner's table is the cost per contender. */
async function race(args: SweepArgs): Promise<BenchResult> {
  let plan;
  try {
    plan = planRace(args);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    console.error(`${err.message}\n${USAGE}`);
    process.exit(2);
  }
  console.log(capacityTable([plan.capacity], args.workload));
  console.log('');
  const threads = args.threads ?? Math.min(2, availableParallelism());
  const cpu0 = process.cpuUsage();
  const wall0 = performance.now();
  const result = await runRace(plan, threads, (line) => console.error(line));
  const cpu = process.cpuUsage(cpu0);
  const wallMs = performance.now() - wall0;
  console.log(raceTables(plan, result));
  console.log('');
  if (args.json !== null) writeSweepJson(args.json, raceJson(plan, result));
  const simulated = result.runs.reduce((s, o) => s + o.simulatedRequests, 0);
  const runCpuMs = result.runs.reduce((s, o) => s + o.cpuMs, 0);
  const cpuMs = (cpu.user + cpu.system) / 1000;
  return {
    title: 'Fleet simulator race: cost per contender',
    columns: ['policy', 'admission', 'runs (twins: taken from the native run)', 'simulated requests', 'thread CPU ms', 'CPU ms per simulated request'],
    rows: plan.contenders.map((c) => {
      const outs = result.runs.filter((o) => o.json.policy === c.policy && o.json.admission === c.admission);
      const n = outs.reduce((s, o) => s + o.simulatedRequests, 0);
      const ms = outs.reduce((s, o) => s + o.cpuMs, 0);
      const twins = outs.filter((o) => o.twin).length;
      return [c.policy, c.admission, twins > 0 ? `${outs.length} (${twins} twins)` : outs.length, n, ms.toFixed(0), n > 0 ? (ms / n).toFixed(3) : '–'];
    }),
    notes: [
      `Simulation CPU (the runs' threads): ${runCpuMs.toFixed(0)} ms over ${simulated} simulated requests = ${(runCpuMs / Math.max(1, simulated)).toFixed(3)} ms per simulated request.`,
      `Process CPU: ${cpuMs.toFixed(0)} ms; ${result.runs.filter((o) => !o.twin).length} runs on ${threads} thread(s), wall ${(wallMs / 1000).toFixed(1)} s.`,
      `Admission: ${[...new Set(result.runs.map((o) => o.admission))].join('; ')}.`,
      'Figures exclude the first 10 % of each run (warm-up); requests still streaming 30 s after the last arrival are judged on what they produced.',
    ],
  };
}

const sim: BenchScenario = async (argv) => {
  let args;
  let plan;
  try {
    args = parseArgs(argv);
    if (args.race) return await race(args);
    plan = planSweep(args);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    console.error(`${err.message}\n${USAGE}`);
    process.exit(2);
  }
  console.log(capacityTable(plan.capacities, args.workload));
  console.log('');
  const threads = args.threads ?? Math.min(2, availableParallelism());
  const cpu0 = process.cpuUsage();
  const wall0 = performance.now();
  const outs = await runSpecs(plan.specs, threads);
  const cpu = process.cpuUsage(cpu0);
  const wallMs = performance.now() - wall0;
  console.log(poolTables(plan, outs));
  console.log('');
  if (args.json !== null) writeSweepJson(args.json, sweepJson(plan, args.fleet, args.workload, args.seed, outs));
  if (args.plot !== null) writeSvg(args.plot, sweepSvg(outs, `${args.fleet} fleet, ${args.workload}, ${args.minutes} simulated min per run, seed ${args.seed}`));

  const simulated = outs.reduce((s, o) => s + o.simulatedRequests, 0);
  const cpuMs = (cpu.user + cpu.system) / 1000;
  const runCpuMs = outs.reduce((s, o) => s + o.cpuMs, 0);
  return {
    title: 'Fleet simulator: cost of each run',
    columns: ['pool', 'policy', 'point', 'simulated requests', 'thread CPU ms', 'CPU ms per simulated request'],
    rows: outs.map((o) => [
      o.json.pool, o.json.policy, o.json.load !== null ? `${o.json.load}×` : o.json.rps !== null ? `${o.json.rps} rps` : `speed ${o.json.speed}`,
      o.simulatedRequests, o.cpuMs.toFixed(0), o.simulatedRequests > 0 ? (o.cpuMs / o.simulatedRequests).toFixed(3) : '–',
    ]),
    notes: [
      `Simulation CPU (the runs' threads): ${runCpuMs.toFixed(0)} ms over ${simulated} simulated requests = ${(runCpuMs / Math.max(1, simulated)).toFixed(3)} ms per simulated request.`,
      `Process CPU for the whole sweep (start-up, capacity sampling and worker start included): ${cpuMs.toFixed(0)} ms over ${simulated} simulated requests = ${(cpuMs / Math.max(1, simulated)).toFixed(3)} ms per simulated request (${threads} thread(s), wall ${(wallMs / 1000).toFixed(1)} s). Per run: the thread's own CPU (/proc/thread-self, 10 ms ticks), engine and gateway set-up included.`,
      `Admission: ${[...new Set(outs.map((o) => o.admission))].join('; ') || '–'}.`,
      `Engines: step-time parameters within ±${args.engineErrorPct} % of their profile, ±${args.stepJitterPct} % noise per step, KV blocks × ${args.kvScale}, ${args.dispatchMs} ms from gateway to engine.`,
      'Figures exclude the first 10 % of each run (warm-up); requests still streaming 30 s after the last arrival are judged on what they produced.',
    ],
  } satisfies BenchResult;
};

export default sim;
