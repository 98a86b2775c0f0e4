// The JSON `--json PATH` writes, in the contract's shape. Byte-stable: fixed key order, runs in plan order,
// figures rounded in run-output.ts, nothing measured in wall or CPU time.
// Thread: main.
import { writeFileSync } from 'node:fs';
import type { RunOutput } from './run-types.ts';
import type { SweepPlan } from './sweep.ts';

export function sweepJson(plan: SweepPlan, fleetName: string, workload: string, seed: number, outs: readonly RunOutput[]): string {
  const doc = {
    fleet: fleetName,
    workload,
    seed,
    pools: plan.capacities.map((c) => ({ id: c.pool, replicas: c.replicas, capacity_rps: Math.round(c.capacityRps * 100) / 100 })),
    runs: outs.map((o) => o.json),
  };
  return `${JSON.stringify(doc, null, 2)}\n`;
}

export function writeSweepJson(path: string, text: string): void {
  writeFileSync(path, text);
}
