// Thread entries for replica-table-concurrency.test.ts and the torn-read integration test: a writer that
// rewrites rows through ReplicaTableWriter as fast as it can, and a reader that checks every row it gets.
// A row is "consistent" when every field encodes the same sequence number k (see fillRow / rowKey).
import { parentPort, workerData } from 'node:worker_threads';
import { ReplicaRow, ReplicaTable, ReplicaTableWriter } from '../../../src/registry/replica-table.ts';
import { ROW_STATE } from '../../../src/registry/replica-table-layout.ts';

/** control[0]: start gate (0 closed, 1 open); control[1]: stop flag. */
export interface ThreadData {
  role: 'writer' | 'reader';
  /** 'synthetic': rows written by fillRow. 'scrape': rows written by the real poller from pages where
   * waiting = running and kv usage = running / 1e6. */
  check: 'synthetic' | 'scrape';
  tableBuffer: SharedArrayBuffer;
  control: SharedArrayBuffer;
  slots: number;
}

export interface ThreadResult {
  operations: number;
  inconsistent: number;
  torn: number;
  distinctKeys: number;
  example: string;
}

export function fillRow(row: ReplicaRow, k: number): void {
  row.generation = k | 0;
  row.assignId = k | 0;
  row.state = ROW_STATE.UP;
  row.flags = k & 0xff;
  row.scrapeFailures = k % 7;
  row.adapterEpoch = k | 0;
  row.restarts = k | 0;
  row.runningAdapterCount = k % 5;
  row.waitingAdapterCount = k % 3;
  row.lastGoodScrapeMs = k * 2;
  row.lastAttemptMs = k * 3;
  row.running = k;
  row.waiting = k + 1;
  row.kvUsage = k / 1e6;
  row.numGpuBlocks = k + 2;
  row.blockSize = k + 3;
  row.maxLoras = k + 4;
  row.preemptionsTotal = k + 5;
  row.prefixQueriesTotal = k + 6;
  row.prefixHitsTotal = k + 7;
  row.prefixHitRate = k + 8;
  row.preemptionsDelta = k + 9;
  row.processStartSeconds = k + 10;
  row.scrapeLatencyMs = k + 11;
}

/** The k a consistent synthetic row encodes, or -1 when its fields disagree. */
export function rowKey(r: ReplicaRow): number {
  const k = r.running;
  const ok = r.generation === (k | 0) && r.assignId === (k | 0) && r.flags === (k & 0xff) && r.scrapeFailures === k % 7 &&
    r.adapterEpoch === (k | 0) && r.restarts === (k | 0) && r.runningAdapterCount === k % 5 && r.waitingAdapterCount === k % 3 &&
    r.lastGoodScrapeMs === k * 2 && r.lastAttemptMs === k * 3 && r.waiting === k + 1 && r.kvUsage === k / 1e6 &&
    r.numGpuBlocks === k + 2 && r.blockSize === k + 3 && r.maxLoras === k + 4 && r.preemptionsTotal === k + 5 &&
    r.prefixQueriesTotal === k + 6 && r.prefixHitsTotal === k + 7 && r.prefixHitRate === k + 8 && r.preemptionsDelta === k + 9 &&
    r.processStartSeconds === k + 10 && r.scrapeLatencyMs === k + 11;
  return ok ? k : -1;
}

/** -2 = not scraped yet (nothing to check). */
function scrapeKey(r: ReplicaRow): number {
  if (r.state !== ROW_STATE.UP) return -2;
  return r.waiting === r.running && r.kvUsage === r.running / 1e6 ? r.running : -1;
}

/** Reads every slot round-robin until the stop flag is set, or until Date.now() passes `untilMs` (then it
 * sets the stop flag itself: that is how the main thread, reading too, ends the run). */
export function readUntilStopped(d: ThreadData, untilMs = Number.POSITIVE_INFINITY): ThreadResult {
  const table = new ReplicaTable(d.tableBuffer);
  const control = new Int32Array(d.control);
  const row = new ReplicaRow();
  const keys = new Set<number>();
  let operations = 0;
  let inconsistent = 0;
  let example = '';
  while (Atomics.load(control, 1) === 0) {
    if ((operations & 1023) === 0 && Date.now() > untilMs) Atomics.store(control, 1, 1);
    for (let slot = 0; slot < d.slots; slot++) {
      if (!table.read(slot, row)) continue;
      operations++;
      const k = d.check === 'synthetic' ? rowKey(row) : scrapeKey(row);
      if (k === -2) continue;
      if (k < 0) {
        inconsistent++;
        if (example === '') example = JSON.stringify(row);
      } else if (keys.size < 100_000) {
        keys.add(k);
      }
    }
  }
  return { operations, inconsistent, torn: table.tornReads, distinctKeys: keys.size, example };
}

function writeUntilStopped(d: ThreadData): ThreadResult {
  const writer = new ReplicaTableWriter(d.tableBuffer);
  const control = new Int32Array(d.control);
  const row = new ReplicaRow();
  let k = 1;
  while (Atomics.load(control, 1) === 0) {
    for (let slot = 0; slot < d.slots; slot++) {
      fillRow(row, k++);
      writer.write(slot, row);
    }
  }
  return { operations: k - 1, inconsistent: 0, torn: 0, distinctKeys: 0, example: '' };
}

if (parentPort !== null && workerData !== null && typeof workerData === 'object' && 'role' in workerData) {
  const d = workerData as ThreadData;
  const control = new Int32Array(d.control);
  parentPort.postMessage('waiting');
  Atomics.wait(control, 0, 0); // the start gate: every thread begins together
  parentPort.postMessage(d.role === 'writer' ? writeUntilStopped(d) : readUntilStopped(d));
}
