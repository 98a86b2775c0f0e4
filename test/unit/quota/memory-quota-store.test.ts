import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MemoryQuotaStore } from '../../../src/quota/memory-quota-store.ts';
import { FakeClock, runStoreBehaviourSuite } from './store-behaviour.ts';

runStoreBehaviourSuite('memory', (clock, leaseTtlMs) => Promise.resolve(new MemoryQuotaStore({ leaseTtlMs, clock: clock.now, renewLeases: false })));

// The memory store drops expired leases from the front of its insertion-ordered map only (O(expired) per
// admission); these pin down that expiry order and insertion order stay the same through renewals.
const limits = Object.freeze({ name: 'acme', tokensPerSecond: 1e9, burstTokens: 1e12, maxInflight: 3 });

test('memory: leases expire in the order they were taken, and the slots they held come back', () => {
  const clock = new FakeClock();
  const store = new MemoryQuotaStore({ leaseTtlMs: 5000, clock: clock.now, renewLeases: false });
  assert.equal(store.acquireNow(limits, 'a', 1).ok, true);
  clock.advance(2000);
  assert.equal(store.acquireNow(limits, 'b', 1).ok, true);
  clock.advance(3500); // a expired at 5000, b lives until 7000
  const c = store.acquireNow(limits, 'c', 1);
  assert.equal(c.ok && c.remainingRequests, 1, 'b and c hold slots, a does not');
  assert.equal(store.acquireNow(limits, 'd', 1).ok, true);
  assert.equal(store.acquireNow(limits, 'e', 1).ok, false, 'b, c, d are live');
  clock.advance(1600); // b expires at 7000
  const e = store.acquireNow(limits, 'e', 1);
  assert.equal(e.ok && e.remainingRequests, 0, 'b expired; c, d, e hold the three slots');
});

test('memory: a renewal extends live leases and drops expired ones, so later expiries are still found', () => {
  const clock = new FakeClock();
  const store = new MemoryQuotaStore({ leaseTtlMs: 5000, clock: clock.now, renewLeases: false });
  store.acquireNow(limits, 'orphan', 1);
  clock.advance(1000);
  store.acquireNow(limits, 'long', 1);
  clock.advance(4500); // orphan expired at 5000; long lives until 6000
  assert.equal(store.renewLive(), 1, 'only long is renewed (to 10500)');
  store.acquireNow(limits, 'x', 1); // expires at 10500
  clock.advance(5100); // 10600: long and x both expired
  const y = store.acquireNow(limits, 'y', 1);
  assert.equal(y.ok && y.remainingRequests, 2, 'every earlier lease expired; only y holds a slot');
  assert.equal(store.settleNow(limits, 'long', 1, 1), false, 'the expired lease is gone');
});
