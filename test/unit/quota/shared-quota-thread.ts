// Worker side of shared-quota-threads.test.ts: attaches to the main thread's quota table and hammers one
// tenant as soon as the start flag flips (both threads released at once). Thread: worker (test only).
import { parentPort, workerData } from 'node:worker_threads';
import { SharedQuotaStore } from '../../../src/quota/shared-quota-store.ts';
import { SharedQuotaTable, type SharedQuotaDescriptor } from '../../../src/quota/shared-quota-table.ts';
import type { TenantLimits } from '../../../src/quota/types.ts';

export interface HammerData {
  name: string;
  desc: SharedQuotaDescriptor;
  slots: [string, number][];
  tenant: TenantLimits;
  /** hold: acquire `rounds` times, report, then settle each twice on 'settle'. churn: take `batch`, settle them, repeat. */
  mode: 'hold' | 'churn';
  rounds: number;
  batch: number;
  cost: number;
  used: number;
  /** Int32 [0] start flag, [1] leases held right now by both threads, [2] the most ever held at once. */
  flags: SharedArrayBuffer;
}

export interface HammerResult {
  admitted: number;
  settled: number;
}

const d = workerData as HammerData;
const port = parentPort!;
const store = new SharedQuotaStore(SharedQuotaTable.attach(d.desc), new Map(d.slots), { leaseTtlMs: 60_000, renewLeases: false });
const flags = new Int32Array(d.flags);
port.postMessage('ready');
Atomics.wait(flags, 0, 0);

let admitted = 0;
let settled = 0;
if (d.mode === 'hold') {
  const ids: string[] = [];
  for (let i = 0; i < d.rounds; i++) {
    const id = `${d.name}-${i}`;
    if (store.acquireNow(d.tenant, id, d.cost).ok) ids.push(id);
  }
  admitted = ids.length;
  port.postMessage({ admitted, settled: 0 } satisfies HammerResult);
  port.once('message', () => {
    for (const id of ids) for (let k = 0; k < 2; k++) if (store.settleNow(d.tenant, id, d.cost, d.used)) settled++;
    port.postMessage({ admitted, settled } satisfies HammerResult);
  });
} else {
  const ids: string[] = [];
  for (let r = 0; r < d.rounds; r++) {
    for (let i = 0; i < d.batch; i++) {
      const id = `${d.name}-${r}-${i}`;
      if (store.acquireNow(d.tenant, id, d.cost).ok) {
        // Counted after the admission and uncounted before the settle: never above the leases really held.
        const now = Atomics.add(flags, 1, 1) + 1;
        for (let max = Atomics.load(flags, 2); now > max; max = Atomics.load(flags, 2)) Atomics.compareExchange(flags, 2, max, now);
        ids.push(id);
        admitted++;
      }
    }
    for (const id of ids) {
      Atomics.sub(flags, 1, 1);
      if (store.settleNow(d.tenant, id, d.cost, d.used)) settled++;
    }
    ids.length = 0;
  }
  port.postMessage({ admitted, settled } satisfies HammerResult);
}
