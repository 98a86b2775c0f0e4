// The behaviour suite every QuotaStore backend must pass, run by memory-quota-store.test.ts and
// redis-quota-store.test.ts with an injected clock, so both backends walk through the same timeline.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { QuotaDecision, QuotaStore, TenantLimits } from '../../../src/quota/types.ts';

export class FakeClock {
  nowMs = 1_767_225_600_000; // 2026-01-01T00:00:00Z: realistic magnitude, like Redis TIME
  readonly now = (): number => this.nowMs;
  advance(ms: number): void {
    this.nowMs += ms;
  }
}

/** A store under test: the contract plus the renewal its timer runs (timers off: the test calls it). */
export type StoreUnderTest = QuotaStore & { renewLive(): number | Promise<number> };
/** A store on a clean slate (fresh key prefix for Redis) with the given lease TTL and clock, renew timer off. */
export type StoreFactory = (clock: FakeClock, leaseTtlMs: number) => Promise<StoreUnderTest>;

const tenant = (name: string, tokensPerSecond: number, burstTokens: number, maxInflight: number): TenantLimits =>
  Object.freeze({ name, tokensPerSecond, burstTokens, maxInflight });

function refused(d: QuotaDecision): Extract<QuotaDecision, { ok: false }> {
  assert.equal(d.ok, false, `expected a refusal, got ${JSON.stringify(d)}`);
  return d as Extract<QuotaDecision, { ok: false }>;
}

export function runStoreBehaviourSuite(backend: string, makeStore: StoreFactory): void {
  const setup = async (t: { after: (fn: () => Promise<void>) => void }, leaseTtlMs = 60_000) => {
    const clock = new FakeClock();
    const store = await makeStore(clock, leaseTtlMs);
    t.after(() => store.close());
    return { clock, store };
  };

  void test(`${backend}: admits within the bucket and reports x-ratelimit figures`, async (t) => {
    const { store } = await setup(t);
    const a = tenant('acme', 100, 1000, 4);
    const d = await store.acquire(a, 'r1', 250);
    assert.deepEqual(d, {
      ok: true, degraded: false, limitTokens: 1000, remainingTokens: 750, resetSeconds: 3, limitRequests: 4, remainingRequests: 3,
    });
  });

  void test(`${backend}: refuses with rate_limit_exceeded and a retry-after after which it succeeds`, async (t) => {
    const { clock, store } = await setup(t);
    const a = tenant('acme', 100, 1000, 10);
    assert.equal((await store.acquire(a, 'r1', 900)).ok, true);
    const r = refused(await store.acquire(a, 'r2', 450));
    assert.equal(r.code, 'rate_limit_exceeded');
    assert.equal(r.remainingTokens, 100);
    assert.equal(r.retryAfterSeconds, 4); // 350 tokens short at 100 tokens/s = 3.5 s, rounded up
    assert.equal(r.remainingRequests, 9);
    clock.advance(3000);
    assert.equal((await store.acquire(a, 'r2', 450)).ok, false, 'one second before retry-after it is still refused');
    clock.advance(1000);
    const ok = await store.acquire(a, 'r2', 450);
    assert.equal(ok.ok, true);
    assert.equal(ok.remainingTokens, 50);
  });

  void test(`${backend}: a refusal takes neither tokens nor a lease`, async (t) => {
    const { store } = await setup(t);
    const a = tenant('acme', 10, 100, 1);
    assert.equal((await store.acquire(a, 'big', 100)).ok, true);
    await store.settle(a, 'big', 100, 100);
    refused(await store.acquire(a, 'r2', 50));
    refused(await store.acquire(a, 'r3', 50));
    // still zero tokens (no refill: the clock did not move) and the slot is free
    const r = refused(await store.acquire(a, 'r4', 1));
    assert.equal(r.code, 'rate_limit_exceeded');
    assert.equal(r.remainingRequests, 1);
  });

  void test(`${backend}: refills at the rate and never above burst`, async (t) => {
    const { clock, store } = await setup(t);
    const a = tenant('acme', 100, 1000, 10);
    assert.equal((await store.acquire(a, 'r1', 1000)).ok, true);
    clock.advance(2500);
    const d = await store.acquire(a, 'r2', 0);
    assert.equal(d.remainingTokens, 250);
    clock.advance(3_600_000);
    const full = await store.acquire(a, 'r3', 0);
    assert.equal(full.remainingTokens, 1000);
    assert.equal(full.resetSeconds, 0);
  });

  void test(`${backend}: a request costing more than burst is always refused with rate_limit_exceeded`, async (t) => {
    const { clock, store } = await setup(t);
    const a = tenant('acme', 100, 1000, 10);
    const r = refused(await store.acquire(a, 'huge', 1001));
    assert.equal(r.code, 'rate_limit_exceeded');
    assert.equal(r.retryAfterSeconds, 1); // bucket already full: retry-after is its minimum
    assert.equal(r.remainingTokens, 1000);
    assert.equal((await store.acquire(a, 'r1', 500)).ok, true);
    const r2 = refused(await store.acquire(a, 'huge', 1001));
    assert.equal(r2.retryAfterSeconds, 5); // seconds until the bucket is full again
    clock.advance(60_000);
    refused(await store.acquire(a, 'huge', 1001));
  });

  void test(`${backend}: caps leases at max_inflight and frees a slot on settle`, async (t) => {
    const { store } = await setup(t);
    const a = tenant('acme', 1000, 100_000, 2);
    assert.equal((await store.acquire(a, 'r1', 10)).ok, true);
    const second = await store.acquire(a, 'r2', 10);
    assert.equal(second.ok && second.remainingRequests, 0);
    const r = refused(await store.acquire(a, 'r3', 10));
    assert.equal(r.code, 'concurrency_limit_exceeded');
    assert.equal(r.remainingRequests, 0);
    assert.equal(r.remainingTokens, 99_980, 'the refused request took no tokens');
    await store.settle(a, 'r1', 10, 10);
    assert.equal((await store.acquire(a, 'r3', 10)).ok, true);
  });

  void test(`${backend}: concurrency retry-after is the learned lease duration minus the oldest lease's age`, async (t) => {
    const { clock, store } = await setup(t, 60_000);
    const a = tenant('acme', 1000, 100_000, 1);
    assert.equal((await store.acquire(a, 'r1', 1)).ok, true);
    // no settle yet: the default estimate of 1 s
    assert.equal(refused(await store.acquire(a, 'x', 1)).retryAfterSeconds, 1);
    clock.advance(8000);
    await store.settle(a, 'r1', 1, 1); // learned: leases last 8 s
    assert.equal((await store.acquire(a, 'r2', 1)).ok, true);
    clock.advance(2000);
    const r = refused(await store.acquire(a, 'x', 1));
    assert.equal(r.code, 'concurrency_limit_exceeded');
    assert.equal(r.retryAfterSeconds, 6); // 8 s expected, 2 s elapsed
    clock.advance(30_000);
    assert.equal(refused(await store.acquire(a, 'x', 1)).retryAfterSeconds, 1, 'overdue: at least 1 s');
  });

  void test(`${backend}: an id with a live lease is refused, so one id cannot carry two requests`, async (t) => {
    const { clock, store } = await setup(t, 60_000);
    const a = tenant('acme', 100, 100_000, 10);
    assert.equal((await store.acquire(a, 'same-id', 100)).ok, true);
    clock.advance(500);
    const r = refused(await store.acquire(a, 'same-id', 100));
    assert.equal(r.code, 'concurrency_limit_exceeded');
    assert.equal(r.retryAfterSeconds, 1); // default 1 s estimate minus 0.5 s age, rounded up
    assert.equal(r.remainingRequests, 9);
    assert.equal(r.remainingTokens, 99_900 + 50, 'the refused duplicate took nothing');
    await store.settle(a, 'same-id', 100, 100);
    assert.equal((await store.acquire(a, 'same-id', 100)).ok, true, 'the id is free again once settled');
  });

  void test(`${backend}: a lease expires after its ttl, so a crashed holder cannot keep the slot`, async (t) => {
    const { clock, store } = await setup(t, 5000);
    const a = tenant('acme', 1000, 100_000, 1);
    assert.equal((await store.acquire(a, 'crashed', 100)).ok, true);
    clock.advance(2000);
    const r = refused(await store.acquire(a, 'r2', 1));
    assert.equal(r.retryAfterSeconds, 1); // min(expiry in 3 s, default estimate 1 s - 2 s age) -> 0 -> 1
    clock.advance(3000);
    const d = await store.acquire(a, 'r2', 1);
    assert.equal(d.ok, true);
    assert.equal(d.remainingRequests, 0);
    // the expired lease is gone: its late settle neither refunds nor frees r2's slot
    const before = await store.acquire(a, 'probe', 0);
    assert.equal(before.ok, false);
    await store.settle(a, 'crashed', 100, 0);
    assert.equal(refused(await store.acquire(a, 'probe', 0)).remainingTokens, refused(before).remainingTokens);
  });

  void test(`${backend}: renewing keeps a long request's lease and refund; an expired lease is not revived`, async (t) => {
    const { clock, store } = await setup(t, 5000);
    const a = tenant('acme', 1, 1000, 1);
    assert.equal((await store.acquire(a, 'long', 500)).ok, true);
    for (let i = 0; i < 4; i++) {
      clock.advance(4000);
      assert.equal(await store.renewLive(), 1);
    }
    clock.advance(4000); // 20 s after admission, 4 s after the last renew: still alive
    assert.equal(refused(await store.acquire(a, 'other', 1)).code, 'concurrency_limit_exceeded');
    await store.settle(a, 'long', 500, 100);
    assert.equal((await store.acquire(a, 'other', 0)).remainingTokens, 920, '500 + 20 refilled + 400 refunded');
    clock.advance(6000); // 'other' expires: renewing does not bring it back
    assert.equal(await store.renewLive(), 0);
    assert.equal((await store.acquire(a, 'third', 0)).ok, true);
  });

  void test(`${backend}: settle refunds reserved minus used exactly once`, async (t) => {
    const { store } = await setup(t);
    const a = tenant('acme', 1, 1000, 10);
    assert.equal((await store.acquire(a, 'r1', 600)).ok, true);
    assert.equal((await store.acquire(a, 'r2', 100)).ok, true); // 300 left
    await store.settle(a, 'r1', 600, 150); // +450
    await store.settle(a, 'r1', 600, 150); // no effect
    await store.settle(a, 'r1', 600, 0); // no effect either
    const d = await store.acquire(a, 'r3', 0);
    assert.equal(d.remainingTokens, 750);
    assert.equal(d.remainingRequests, 8, 'r2 and r3 hold leases; r1 released once');
  });

  void test(`${backend}: settle never refunds above burst nor below zero`, async (t) => {
    const { clock, store } = await setup(t);
    const a = tenant('acme', 100, 1000, 10);
    assert.equal((await store.acquire(a, 'r1', 800)).ok, true);
    assert.equal((await store.acquire(a, 'r2', 100)).ok, true);
    clock.advance(5000); // refills to full
    await store.settle(a, 'r1', 800, 0);
    assert.equal((await store.acquire(a, 'p', 0)).remainingTokens, 1000);
    assert.equal((await store.acquire(a, 'r3', 1000)).ok, true);
    await store.settle(a, 'r2', 100, 5000); // used more than reserved: no refund, no extra charge
    assert.equal((await store.acquire(a, 'p2', 0)).remainingTokens, 0);
  });

  void test(`${backend}: settling an unknown request changes nothing`, async (t) => {
    const { store } = await setup(t);
    const a = tenant('acme', 1, 1000, 1);
    assert.equal((await store.acquire(a, 'r1', 500)).ok, true);
    await store.settle(a, 'never-admitted', 500, 0);
    const r = refused(await store.acquire(a, 'r2', 0));
    assert.equal(r.code, 'concurrency_limit_exceeded');
    assert.equal(r.remainingTokens, 500);
  });

  void test(`${backend}: when short of both tokens and slots it reports tokens with the longer wait`, async (t) => {
    const { clock, store } = await setup(t, 600_000);
    const a = tenant('acme', 100, 1000, 1);
    assert.equal((await store.acquire(a, 'r1', 900)).ok, true);
    clock.advance(20_000);
    await store.settle(a, 'r1', 900, 900); // learned duration 20 s; bucket refilled to 1000
    assert.equal((await store.acquire(a, 'r2', 1000)).ok, true);
    const r = refused(await store.acquire(a, 'r3', 200));
    assert.equal(r.code, 'rate_limit_exceeded');
    assert.equal(r.retryAfterSeconds, 20); // tokens need 2 s, the slot about 20 s
  });

  void test(`${backend}: tenants do not share buckets or slots`, async (t) => {
    const { store } = await setup(t);
    const a = tenant('acme', 1, 100, 1);
    const b = tenant('globex', 1, 100, 1);
    assert.equal((await store.acquire(a, 'a1', 100)).ok, true);
    const d = await store.acquire(b, 'b1', 100);
    assert.equal(d.ok, true);
    assert.equal(d.remainingRequests, 0);
  });

  void test(`${backend}: a clock that goes backwards never refills nor goes negative`, async (t) => {
    const { clock, store } = await setup(t);
    const a = tenant('acme', 100, 1000, 10);
    assert.equal((await store.acquire(a, 'r1', 1000)).ok, true);
    clock.advance(-10_000);
    const r = refused(await store.acquire(a, 'r2', 1));
    assert.equal(r.remainingTokens, 0);
    clock.advance(10_000 + 1000);
    assert.equal((await store.acquire(a, 'r2', 100)).ok, true);
  });

  void test(`${backend}: fractional rates refill exactly`, async (t) => {
    const { clock, store } = await setup(t);
    const a = tenant('acme', 0.5, 10, 10);
    assert.equal((await store.acquire(a, 'r1', 10)).ok, true);
    const r = refused(await store.acquire(a, 'r2', 3));
    assert.equal(r.retryAfterSeconds, 6);
    clock.advance(6000);
    assert.equal((await store.acquire(a, 'r2', 3)).remainingTokens, 0);
  });
}
