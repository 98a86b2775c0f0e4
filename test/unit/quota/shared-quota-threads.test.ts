// Two real worker threads hammer one tenant of one shared quota table at the same instant: the bucket admits
// exactly floor(burst / cost), the concurrency cap is exact, every settle refunds once, and the table returns to
// full (tokens and slots) once everything is settled, as seen from a third view of the table on this thread.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Worker } from 'node:worker_threads';
import { spawnWorker } from '../../../src/util/spawn-worker.ts';
import { SharedQuotaStore } from '../../../src/quota/shared-quota-store.ts';
import { SharedQuotaTable } from '../../../src/quota/shared-quota-table.ts';
import type { TenantLimits } from '../../../src/quota/types.ts';
import type { HammerData, HammerResult } from './shared-quota-thread.ts';

const THREAD_URL = new URL('./shared-quota-thread.ts', import.meta.url);

interface Hammer {
  worker: Worker;
  next(): Promise<HammerResult>;
}

async function hammer(table: SharedQuotaTable, flags: SharedArrayBuffer, d: Omit<HammerData, 'name' | 'desc' | 'slots' | 'flags'>): Promise<Hammer[]> {
  const out: Hammer[] = [];
  for (const name of ['w0', 'w1']) {
    const worker = spawnWorker(THREAD_URL, { workerData: { ...d, name, desc: table.descriptor, slots: [...table.slotMap()], flags } satisfies HammerData });
    const inbox: unknown[] = [];
    const waiters: ((m: unknown) => void)[] = [];
    worker.on('message', (m: unknown) => { const w = waiters.shift(); if (w) w(m); else inbox.push(m); });
    worker.on('error', (err) => { throw err; });
    const recv = (): Promise<unknown> => (inbox.length > 0 ? Promise.resolve(inbox.shift()) : new Promise((r) => waiters.push(r)));
    assert.equal(await recv(), 'ready');
    out.push({ worker, next: () => recv() as Promise<HammerResult> });
  }
  const f = new Int32Array(flags);
  Atomics.store(f, 0, 1);
  Atomics.notify(f, 0);
  return out;
}

const probe = (table: SharedQuotaTable): SharedQuotaStore => new SharedQuotaStore(table, table.slotMap(), { leaseTtlMs: 60_000, renewLeases: false });

test('two threads on one bucket: exactly floor(burst / cost) admitted, each settle refunds once, the slots come back', async (t) => {
  // No refill to speak of (1e-9 tokens/s): 10,000 / 130 = 76 admissions, whatever the interleaving.
  const tenant: TenantLimits = Object.freeze({ name: 'acme', tokensPerSecond: 1e-9, burstTokens: 10_000, maxInflight: 1000 });
  const table = SharedQuotaTable.create([tenant]);
  const flags = new SharedArrayBuffer(12);
  const hs = await hammer(table, flags, { tenant, mode: 'hold', rounds: 400, batch: 0, cost: 130, used: 30 });
  t.after(async () => { for (const h of hs) await h.worker.terminate(); });
  const first = await Promise.all(hs.map((h) => h.next()));
  assert.equal(first[0]!.admitted + first[1]!.admitted, 76, `per thread ${first.map((r) => r.admitted).join(' + ')}`);
  for (const h of hs) h.worker.postMessage('settle');
  const done = await Promise.all(hs.map((h) => h.next()));
  assert.deepEqual(done.map((r) => r.settled), done.map((r) => r.admitted), 'each lease settled exactly once (the second settle is a no-op)');
  // 10,000 - 76 x 130 = 120 left, + 76 x 100 refunded = 7,720; every lease released.
  const p = probe(table).acquireNow(tenant, 'probe', 0);
  assert.equal(p.ok && p.remainingTokens, 7720);
  assert.equal(p.ok && p.remainingRequests, 999);
});

test('two threads on one tenant: the concurrency cap is exact, and the table returns to full', async (t) => {
  const tenant: TenantLimits = Object.freeze({ name: 'acme', tokensPerSecond: 1e-9, burstTokens: 1_000_000, maxInflight: 7 });
  const table = SharedQuotaTable.create([tenant]);
  const flags = new SharedArrayBuffer(12);
  const hs = await hammer(table, flags, { tenant, mode: 'hold', rounds: 300, batch: 0, cost: 10, used: 0 });
  t.after(async () => { for (const h of hs) await h.worker.terminate(); });
  const first = await Promise.all(hs.map((h) => h.next()));
  assert.equal(first[0]!.admitted + first[1]!.admitted, 7, `per thread ${first.map((r) => r.admitted).join(' + ')}`);
  for (const h of hs) h.worker.postMessage('settle');
  await Promise.all(hs.map((h) => h.next()));
  const p = probe(table).acquireNow(tenant, 'probe', 0);
  assert.equal(p.ok && p.remainingTokens, 1_000_000, 'every reservation refunded in full (used 0)');
  assert.equal(p.ok && p.remainingRequests, 6, 'every lease released');
});

test('two threads churning acquire/settle on one tenant lose no update and never exceed the cap', async (t) => {
  // Each thread takes 3 leases then settles them, 4,000 times: 6 wanted, 4 allowed, so they contend for slots.
  const tenant: TenantLimits = Object.freeze({ name: 'acme', tokensPerSecond: 1e-9, burstTokens: 1_000_000, maxInflight: 4 });
  const table = SharedQuotaTable.create([tenant]);
  const flags = new SharedArrayBuffer(12);
  const hs = await hammer(table, flags, { tenant, mode: 'churn', rounds: 4000, batch: 3, cost: 10, used: 3 });
  t.after(async () => { for (const h of hs) await h.worker.terminate(); });
  const r = await Promise.all(hs.map((h) => h.next()));
  const admitted = r[0]!.admitted + r[1]!.admitted;
  assert.deepEqual(r.map((x) => x.settled), r.map((x) => x.admitted));
  assert.ok(Atomics.load(new Int32Array(flags), 2) <= 4, `most leases held at once: ${Atomics.load(new Int32Array(flags), 2)}`);
  assert.ok(admitted >= 8000, `each thread holds at most 3 of 4 slots, so at least one of its batch is admitted per round: ${admitted}`);
  // Each admission nets 3 tokens (10 taken, 7 refunded): a lost read-modify-write would show here.
  const p = probe(table).acquireNow(tenant, 'probe', 0);
  assert.equal(p.ok && p.remainingTokens, 1_000_000 - 3 * admitted);
  assert.equal(p.ok && p.remainingRequests, 3);
});
