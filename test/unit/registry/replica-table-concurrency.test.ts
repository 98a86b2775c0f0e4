import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Worker } from 'node:worker_threads';
import { spawnWorker } from '../../../src/util/spawn-worker.ts';
import { ReplicaRow, ReplicaTable, ReplicaTableWriter } from '../../../src/registry/replica-table.ts';
import { ROW_STRIDE_BYTES } from '../../../src/registry/replica-table-layout.ts';
import { fillRow, readUntilStopped, rowKey, type ThreadData, type ThreadResult } from './table-threads.ts';

const THREADS_URL = new URL('./table-threads.ts', import.meta.url);
const SLOTS = 4;
const RUN_MS = 1000;

function start(d: ThreadData): { worker: Worker; waiting: Promise<void>; result: Promise<ThreadResult> } {
  const worker = spawnWorker(THREADS_URL, { workerData: d });
  let onWaiting!: () => void;
  const waiting = new Promise<void>((r) => { onWaiting = r; });
  const result = new Promise<ThreadResult>((resolve, reject) => {
    worker.on('message', (m: ThreadResult | 'waiting') => (m === 'waiting' ? onWaiting() : resolve(m)));
    worker.on('error', reject);
  });
  return { worker, waiting, result };
}

void test('a row written by one thread is never returned torn to readers on other threads', async (t) => {
  const tableBuffer = new SharedArrayBuffer(SLOTS * ROW_STRIDE_BYTES);
  const control = new SharedArrayBuffer(8);
  const gate = new Int32Array(control);
  const base = { tableBuffer, control, slots: SLOTS, check: 'synthetic' } as const;
  const writer = start({ ...base, role: 'writer' });
  const readers = [start({ ...base, role: 'reader' }), start({ ...base, role: 'reader' })];
  t.after(async () => {
    Atomics.store(gate, 1, 1);
    for (const w of [writer, ...readers]) await w.worker.terminate();
  });
  await Promise.all([writer.waiting, ...readers.map((r) => r.waiting)]);
  Atomics.store(gate, 0, 1);
  Atomics.notify(gate, 0); // every thread starts at once
  const mine = readUntilStopped({ ...base, role: 'reader' }, Date.now() + RUN_MS);
  const results = [mine, ...(await Promise.all(readers.map((r) => r.result)))];
  const written = await writer.result;

  for (const r of results) {
    t.diagnostic(`reads ${r.operations}, distinct rows seen ${r.distinctKeys}, torn reads detected and retried ${r.torn}`);
    assert.equal(r.inconsistent, 0, `a torn row was returned: ${r.example}`);
    assert.ok(r.operations > 0);
  }
  t.diagnostic(`rows written ${written.operations}`);
  assert.ok(written.operations > SLOTS, 'the writer ran');
  // The readers saw the table change under them (the run overlapped the writes), not one frozen snapshot.
  assert.ok(results.some((r) => r.distinctKeys > 1), 'readers observed the writes');
});

void test('a row whose write is in progress (odd version) is never returned, and is once the write completes', () => {
  const table = new ReplicaTableWriter(1);
  const row = new ReplicaRow();
  fillRow(row, 7);
  table.write(0, row);
  const out = new ReplicaRow();
  assert.ok(table.read(0, out));
  assert.equal(rowKey(out), 7);
  // A write in progress (odd version) is never returned: read() spins and gives up rather than return it.
  const i32 = new Int32Array(table.buffer);
  Atomics.add(i32, 0, 1);
  const reader = new ReplicaTable(table.buffer);
  assert.equal(reader.read(0, out), false);
  assert.ok(reader.tornReads > 0);
  Atomics.add(i32, 0, 1);
  assert.equal(reader.read(0, out), true);
});

void test('rows are independent: writing one slot leaves its neighbours untouched', () => {
  const table = new ReplicaTableWriter(3);
  const row = new ReplicaRow();
  fillRow(row, 11);
  table.write(0, row);
  fillRow(row, 22);
  table.write(2, row);
  fillRow(row, 33);
  table.write(1, row);
  const out = new ReplicaRow();
  for (const [slot, k] of [[0, 11], [1, 33], [2, 22]] as const) {
    assert.ok(table.read(slot, out));
    assert.equal(rowKey(out), k);
  }
  // The data-plane word lives outside the seqlock and is per row too.
  assert.equal(table.reportDataPlaneFailure(1), 1);
  assert.equal(table.reportDataPlaneFailure(1), 2);
  assert.equal(table.dataPlaneFailures(0), 0);
  assert.equal(table.clearDataPlaneFailuresIf(1, 1), false, 'a failure added since it was seen is not cleared');
  assert.equal(table.clearDataPlaneFailuresIf(1, 2), true);
  assert.equal(table.dataPlaneFailures(1), 0);
});

void test('a same-thread table (the simulator\'s) reads every field as written, and skips a row whose write is in progress', () => {
  const table = new ReplicaTableWriter(2, true);
  const row = new ReplicaRow();
  const out = new ReplicaRow();
  for (const k of [6, 41, 977]) {
    fillRow(row, k);
    table.write(k % 2, row);
    assert.ok(table.read(k % 2, out));
    assert.equal(rowKey(out), k);
  }
  const i32 = new Int32Array(table.buffer);
  Atomics.add(i32, 0, 1);
  assert.equal(table.read(0, out), false, 'odd version: a write in progress');
  Atomics.add(i32, 0, 1);
  assert.equal(table.read(0, out), true);
  assert.equal(rowKey(out), 6);
});
