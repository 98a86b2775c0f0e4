// The shared-memory quota store passes the same behaviour suite as the memory and Redis backends, plus the
// lease-order cases the memory store pins down, and the table's own rules: tenant slots assigned at setup and
// on reload, a region that grows without losing leases, a full table that refuses a reload and changes nothing.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SharedQuotaStore } from '../../../src/quota/shared-quota-store.ts';
import { SharedQuotaTable } from '../../../src/quota/shared-quota-table.ts';
import type { TenantLimits } from '../../../src/quota/types.ts';
import { FakeClock, runStoreBehaviourSuite } from './store-behaviour.ts';

const limits = (name: string, tokensPerSecond: number, burstTokens: number, maxInflight: number): TenantLimits =>
  Object.freeze({ name, tokensPerSecond, burstTokens, maxInflight });

// The suite's tenants use at most 10 leases; the table is sized from the config it is given.
runStoreBehaviourSuite('shared', (clock, leaseTtlMs) => {
  const table = SharedQuotaTable.create([limits('acme', 1, 1, 16), limits('globex', 1, 1, 16)]);
  return Promise.resolve(new SharedQuotaStore(table, table.slotMap(), { leaseTtlMs, clock: clock.now, renewLeases: false }));
});

const acme = limits('acme', 1e9, 1e12, 3);

function fresh(leaseTtlMs = 5000): { clock: FakeClock; table: SharedQuotaTable; store: SharedQuotaStore } {
  const clock = new FakeClock();
  const table = SharedQuotaTable.create([acme]);
  return { clock, table, store: new SharedQuotaStore(table, table.slotMap(), { leaseTtlMs, clock: clock.now, renewLeases: false }) };
}

test('shared: leases expire in the order they were taken, and the slots they held come back', () => {
  const { clock, store } = fresh();
  assert.equal(store.acquireNow(acme, 'a', 1).ok, true);
  clock.advance(2000);
  assert.equal(store.acquireNow(acme, 'b', 1).ok, true);
  clock.advance(3500); // a expired at 5000, b lives until 7000
  const c = store.acquireNow(acme, 'c', 1);
  assert.equal(c.ok && c.remainingRequests, 1, 'b and c hold slots, a does not');
  assert.equal(store.acquireNow(acme, 'd', 1).ok, true);
  assert.equal(store.acquireNow(acme, 'e', 1).ok, false, 'b, c, d are live');
  clock.advance(1600); // b expires at 7000
  const e = store.acquireNow(acme, 'e', 1);
  assert.equal(e.ok && e.remainingRequests, 0, 'b expired; c, d, e hold the three slots');
});

test('shared: a renewal extends live leases and forgets expired ones; a late settle of a reused entry changes nothing', () => {
  const { clock, store } = fresh();
  store.acquireNow(acme, 'orphan', 1);
  clock.advance(1000);
  store.acquireNow(acme, 'long', 1);
  clock.advance(4500); // orphan expired at 5000; long lives until 6000
  assert.equal(store.renewLive(), 1, 'only long is renewed (to 10500)');
  assert.equal(store.heldCount, 1, 'the expired orphan is forgotten');
  store.acquireNow(acme, 'x', 1); // takes the orphan's entry, expires at 10500
  clock.advance(5100); // 10600: long and x both expired
  const y = store.acquireNow(acme, 'y', 1);
  assert.equal(y.ok && y.remainingRequests, 2, 'every earlier lease expired; only y holds a slot');
  assert.equal(store.settleNow(acme, 'long', 1, 1), false, 'the expired lease is gone');
  assert.equal(store.settleNow(acme, 'x', 1, 1), false, 'x expired; its entry now holds y');
  const z = store.acquireNow(acme, 'z', 1);
  assert.equal(z.ok && z.remainingRequests, 1, 'y still holds its slot');
});

test('shared: two stores on one table (two threads\' views) share buckets and leases; each settles its own', () => {
  const clock = new FakeClock();
  const a = limits('acme', 1e-9, 1000, 2);
  const table = SharedQuotaTable.create([a]);
  const one = new SharedQuotaStore(table, table.slotMap(), { leaseTtlMs: 60_000, clock: clock.now, renewLeases: false });
  const two = new SharedQuotaStore(SharedQuotaTable.attach(table.descriptor), table.slotMap(), { leaseTtlMs: 60_000, clock: clock.now, renewLeases: false });
  assert.equal(one.acquireNow(a, 'r1', 400).ok, true);
  const d = two.acquireNow(a, 'r2', 400);
  assert.equal(d.ok && d.remainingTokens, 200);
  const r = two.acquireNow(a, 'r3', 100);
  assert.equal(!r.ok && r.code, 'concurrency_limit_exceeded');
  assert.equal(two.acquireNow(a, 'r1', 0).ok, false, 'r1 is live on the other store: one id, one request');
  assert.equal(two.settleNow(a, 'r1', 400, 0), false, 'a store settles only what it admitted');
  assert.equal(one.settleNow(a, 'r1', 400, 100), true);
  const after = two.acquireNow(a, 'r3', 0);
  assert.equal(after.ok && after.remainingTokens, 500);
});

test('shared: a reload adds tenants and grows a region without losing the leases held; a full table refuses and changes nothing', () => {
  const clock = new FakeClock();
  const a = limits('acme', 1e9, 1e12, 2);
  const table = SharedQuotaTable.create([a], { tenants: 2, leases: 8 });
  const store = new SharedQuotaStore(table, table.slotMap(), { leaseTtlMs: 60_000, clock: clock.now, renewLeases: false });
  assert.equal(store.acquireNow(a, 'r1', 1).ok, true);
  assert.equal(store.acquireNow(a, 'r2', 1).ok, true);

  const a4 = limits('acme', 1e9, 1e12, 4);
  const b = limits('globex', 1e9, 1e12, 2);
  store.setSlots(table.assign([a4, b])); // acme's region moves (2 -> 4 entries), globex gets 2: 8 of 8 used
  assert.equal(store.acquireNow(b, 'g1', 1).ok, true);
  const third = store.acquireNow(a4, 'r3', 1);
  assert.equal(third.ok && third.remainingRequests, 1, 'r1 and r2 moved with the region');
  assert.equal(store.acquireNow(a4, 'r1', 1).ok, false, 'r1 is still live after the move');
  assert.equal(store.settleNow(a4, 'r1', 1, 1), true, 'a lease taken before the move settles after it');

  const before = table.slotMap();
  assert.throws(() => table.assign([a4, b, limits('initech', 1, 1, 1)]), /shared memory table is full/);
  assert.throws(() => table.assign([limits('acme', 1e9, 1e12, 5), b]), /shared memory table is full/);
  assert.deepEqual(table.slotMap(), before);
  assert.throws(() => store.acquireNow(limits('initech', 1, 1, 1), 'x', 1), /no slot in the shared table/);
  assert.equal(store.acquireNow(a4, 'r4', 1).ok, true);
  const still = store.acquireNow(a4, 'r5', 1);
  assert.equal(still.ok && still.remainingRequests, 0, 'acme keeps its four entries after the refused reload');
  assert.equal(store.acquireNow(a4, 'r6', 1).ok, false);
});
