// Admission rules, each against a small fleet in virtual time (fixture.ts): the budget (free KV of healthy,
// fresh replicas − headroom − what is queued ahead), the router's fit and the connection cap, deadline order,
// a full queue, shedding with a Retry-After from the drain rate (decode fallback, then learned), a deadline
// passing in the queue, cancel while queued, a request larger than any replica's KV, pumping on release and
// on the scrape poll. Two replicas of 100 blocks × 16 tokens by default: 3,200 tokens, headroom 480.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { harness, kindOf, ScriptedPolicy, type Spec } from './fixture.ts';

const two = (a: Partial<Spec> = {}, b: Partial<Spec> = {}): Spec[] => [
  { id: 'a', blocks: 100, usage: 0, ...a },
  { id: 'b', blocks: 100, usage: 0, ...b },
];

test('budget: free KV of healthy, fresh, non-draining replicas with a known size, less the headroom', () => {
  // room = Σ free tokens − 0.15 × Σ total tokens, over the replicas counted.
  const cases: Array<[string, Partial<Spec>, Partial<Spec>, number]> = [
    ['empty pool: 3,200 − 480', {}, {}, 2720],
    ['a half full: 800 + 1,600 − 480', { usage: 0.5 }, {}, 1920],
    ['a past its headroom line: its free tokens still count, its headroom share too', { usage: 0.9 }, { usage: 0.9 }, -160],
    ['a full: nothing free, never negative', { usage: 1 }, {}, 1120],
    ['b stale: 1,600 − 240', {}, { scrapedAt: 10_000 - 5001 }, 1360],
    ['b unhealthy', {}, { healthy: false }, 1360],
    ['b draining', {}, { draining: true }, 1360],
    ['b reports no KV size', {}, { blocks: undefined }, 1360],
    ['b never scraped', {}, { scrapedAt: undefined }, 1360],
    ['nobody reports a KV size: admission cannot budget, connections alone limit', { blocks: undefined }, { blocks: undefined }, Infinity],
  ];
  for (const [name, a, b, room] of cases) {
    const h = harness(two(a, b));
    assert.equal(h.adm.pool('p').roomTokens(), room, name);
  }
  // The rule in action: the pool's room decides even where one replica alone would take the request.
  const h = harness(two({ usage: 0.9, running: 20 }, { usage: 0.5, running: 20 }));
  // room: 160 + 800 − 480 = 480; b alone has 1,360 − 800 = 560 beyond its headroom.
  h.ask('fits', { promptTokens: 80, n: 4 }); // need 480
  assert.equal(kindOf(h, 'fits'), 'admitted:b');
  const g = harness(two({ usage: 0.9, running: 20 }, { usage: 0.5, running: 20 }));
  g.ask('over', { promptTokens: 81, n: 4 }); // need 481
  assert.equal(kindOf(g, 'over'), 'pending');
});

test('budget: the estimate counts this gateway\'s dispatches since the scrape, and the reservations of queued requests ahead', () => {
  const h = harness(two({ running: 20 }, { running: 20 }));
  h.ask('big', { promptTokens: 100, n: 9 }); // need 1,000: on a (room 1,600 − 240 = 1,360)
  assert.equal(kindOf(h, 'big'), 'admitted:a');
  // The ledger holds ceil(1,000 / 16) = 63 blocks on a: 1,600 − 1,008 − 240 = 352 left there, 848 on b.
  h.ask('fits', { promptTokens: 100, n: 4 }); // need 500: not on a (352), so on b
  assert.equal(kindOf(h, 'fits'), 'admitted:b');
  // Pool room: a 592 + b 1,088 − 480 = 1,200; no single replica has 1,100 beyond its headroom.
  h.ask('waits', { promptTokens: 100, n: 10, tier: 'batch' });
  assert.equal(kindOf(h, 'waits'), 'pending');
  // A later-deadline request counts the queued 1,100 ahead of it (100 left); an earlier-deadline one does not.
  h.ask('behind', { tier: 'batch' });
  assert.equal(kindOf(h, 'behind'), 'pending');
  h.ask('ahead', { tier: 'premium' });
  assert.equal(kindOf(h, 'ahead'), 'admitted:b');
  assert.equal(h.adm.pool('p').queueDepth, 2);
  assert.equal(h.adm.pool('p').queuedTokens, 1300);
});

test('per replica: a choice without room beyond its own headroom is replaced, whatever the policy', () => {
  const policy = new ScriptedPolicy(); // always the first eligible replica
  const h = harness(two({ usage: 0.8, running: 20 }, { running: 20 }), { policy });
  h.ask('r', { promptTokens: 100, n: 3 }); // need 400; a has 1,600 × 0.05 = 80 beyond its headroom
  assert.equal(kindOf(h, 'r'), 'admitted:b');
  const o = h.outcomes.get('r');
  assert.ok(o?.kind === 'admitted');
  assert.equal(o.decision.why, 'headroom', 'the decision says the first choice was passed over for room');
  // Nowhere to go: b has 1,360 − 416 = 944 left, a 80; the pool has 944 + 80 = 1,024.
  h.ask('s', { promptTokens: 100, n: 9, tier: 'batch' }); // need 1,000
  assert.equal(kindOf(h, 's'), 'pending');
});

test('fit: a replica the policy says does not fit is not admitted though the pool has room; a later poll admits it', () => {
  const policy = new ScriptedPolicy();
  policy.fits = false;
  const h = harness(two({ running: 20 }, { running: 20 }), { policy });
  h.ask('r');
  assert.equal(kindOf(h, 'r'), 'pending');
  policy.fits = true;
  h.clock.advance(100);
  assert.equal(kindOf(h, 'r'), 'admitted:a');
});

test('connection cap: a replica with connections_per_replica requests in flight is skipped for every policy; all full → queue, pumped on release', () => {
  const policy = new ScriptedPolicy(); // always the first eligible replica
  const h = harness(two({ running: 20 }, { running: 20 }), { policy, connections: 2 });
  for (const r of ['r1', 'r2', 'r3', 'r4']) h.ask(r);
  assert.deepEqual(['r1', 'r2', 'r3', 'r4'].map((r) => kindOf(h, r)), ['admitted:a', 'admitted:a', 'admitted:b', 'admitted:b']);
  h.ask('r5', { tier: 'batch' });
  assert.equal(kindOf(h, 'r5'), 'pending', 'both replicas at the cap: it waits in admission, not in a socket queue');
  h.finish('r3');
  assert.equal(kindOf(h, 'r5'), 'admitted:b');
  assert.equal(h.adm.pool('p').queueDepth, 0);
});

test('connection cap with the default policy: the choice is re-asked without the full replica', () => {
  const h = harness(two(), { connections: 1 });
  h.ask('r1');
  h.ask('r2');
  assert.deepEqual([kindOf(h, 'r1'), kindOf(h, 'r2')].sort(), ['admitted:a', 'admitted:b']);
  h.ask('r3', { tier: 'batch' });
  assert.equal(kindOf(h, 'r3'), 'pending');
});

test('connection-bound waits: each queued request waits for those ahead of it, so the estimate and Retry-After grow with the queue', () => {
  const h = harness(two({ running: 20 }, { running: 20 }), { connections: 1 });
  h.ask('r1');
  h.ask('r2');
  // Both replicas at the cap; the pool frees 2 × 20 × 1000 / 50 = 800 tokens/s; each request is 200:
  // the k-th in line waits (k + 1) × 0.25 s, so 8 fit the standard tier's 2 s and the 9th does not.
  for (let k = 0; k < 10; k++) h.ask(`q${k}`);
  assert.deepEqual(Array.from({ length: 10 }, (_, k) => kindOf(h, `q${k}`)), [...Array(8).fill('pending'), 'rejected:server_overloaded', 'rejected:server_overloaded']);
  const o = h.outcomes.get('q8');
  assert.ok(o?.kind === 'rejected');
  assert.equal(o.rejection.retryAfterSeconds, 3); // 9 × 200 / 800 = 2.25 s
  h.finish('r1');
  assert.equal(kindOf(h, 'q0').split(':')[0], 'admitted', 'a freed connection goes to the head at once');
  assert.equal(kindOf(h, 'q1'), 'pending');
});

test('deadline order: when room appears the earliest deadline goes first, whatever the arrival order', () => {
  // usage 0.9: 10 free blocks per replica, 320 tokens, room 640 − 480 = 160: nothing of 200 fits.
  const h = harness(two({ usage: 0.9, running: 20 }, { usage: 0.9, running: 20 }));
  h.ask('standard', { tier: 'standard' });
  h.clock.advance(10);
  h.ask('premium', { tier: 'premium' });
  assert.deepEqual([kindOf(h, 'standard'), kindOf(h, 'premium')], ['pending', 'pending']);
  // a at 0.65: 560 free, 320 beyond its headroom; b unchanged; the pool's room 560 + 160 − 480 = 240: one of 200.
  h.fleet.scrape({ a: 0.65 });
  h.clock.advance(100);
  assert.equal(kindOf(h, 'premium'), 'admitted:a');
  assert.equal(kindOf(h, 'standard'), 'pending');
});

test('shed: the estimated wait beyond the tier\'s allowance gets 429 server_overloaded with Retry-After from the drain rate', () => {
  // usage 0.9, 1 running sequence per replica and nothing of ours in flight: the decode fallback frees
  // 2 × 1 × 1000 / 50 = 40 tokens/s; a request of 200 is 200 + 160 = 360 tokens short: 9 s.
  const cases: Array<['premium' | 'standard' | 'batch', string, number | null]> = [
    ['premium', 'rejected:server_overloaded', 9],
    ['standard', 'rejected:server_overloaded', 9],
    ['batch', 'pending', null],
  ];
  for (const [tier, want, retryAfter] of cases) {
    const h = harness(two({ usage: 0.9, running: 1 }, { usage: 0.9, running: 1 }));
    h.ask('r', { tier });
    assert.equal(kindOf(h, 'r'), want, tier);
    const o = h.outcomes.get('r');
    if (retryAfter !== null) {
      assert.ok(o?.kind === 'rejected');
      assert.equal(o.shed, 'wait_exceeds_deadline');
      assert.equal(o.rejection.retryAfterSeconds, retryAfter, tier);
      assert.match(o.rejection.message ?? '', /estimated wait \(9 s\)/);
    }
  }
  // The fallback follows the replicas' batch: 4 running per replica frees 4× as fast: 360 / 160 = 2.25 s.
  const h = harness(two({ usage: 0.9, running: 4 }, { usage: 0.9, running: 4 }));
  h.ask('r', { tier: 'standard' });
  const o = h.outcomes.get('r');
  assert.ok(o?.kind === 'rejected');
  assert.equal(o.rejection.retryAfterSeconds, 3);
});

test('full queue: 429 server_overloaded, Retry-After for the whole queue ahead plus this request', () => {
  const h = harness(two({ usage: 0.9, running: 1 }, { usage: 0.9, running: 1 }), { admission: { max_queued_requests: 1 } });
  h.ask('first', { tier: 'batch' }); // 360 short at 40 tokens/s: 9 s, within batch's 10 s
  assert.equal(kindOf(h, 'first'), 'pending');
  h.ask('second', { tier: 'batch' });
  const o = h.outcomes.get('second');
  assert.ok(o?.kind === 'rejected');
  assert.equal(o.shed, 'queue_full');
  assert.equal(o.rejection.code, 'server_overloaded');
  // 200 queued + 200 + 160 beyond the room = 560 tokens at 40 tokens/s = 14 s
  assert.equal(o.rejection.retryAfterSeconds, 14);
  const none = harness(two({ usage: 0.9, running: 1 }, { usage: 0.9, running: 1 }), { admission: { max_queued_requests: 0 } });
  none.ask('r', { tier: 'batch' });
  assert.equal(kindOf(none, 'r'), 'rejected:server_overloaded', 'max_queued_requests 0: admit now or shed');
});

test('drain rate learned from completions replaces the decode fallback in the estimate', () => {
  const h = harness(two({ running: 1, blocks: 400 }, { running: 1, blocks: 400 }));
  for (let i = 0; i < 10; i++) h.ask(`r${i}`);
  h.clock.advance(1000);
  for (let i = 0; i < 10; i++) h.finish(`r${i}`);
  // 2,000 tokens released after 1 s busy: the learned rate is 2,000 / (5,000 × (1 − e^-0.2)) per ms.
  const learned = (2000 / (5000 * (1 - Math.exp(-0.2)))) * 1000;
  assert.ok(Math.abs(h.adm.pool('p').drainPerSecond(h.clock.now()) - learned) < 1e-6);
  h.fleet.scrape({ a: 0.9, b: 0.9 });
  // Room 1,280 free − 1,920 headroom = −640: 840 short at ≈ 2,207 tokens/s: 0.38 s, within premium's 1 s
  // (the fallback's 40 tokens/s said 21 s).
  h.ask('small', { tier: 'premium' });
  assert.equal(kindOf(h, 'small'), 'pending');
  // need 3,100: 3,100 + 200 queued ahead (same premium deadline, earlier) + 640 = 3,940 short → 1.79 s > 1 s
  h.ask('large', { tier: 'premium', n: 30 });
  const o = h.outcomes.get('large');
  assert.ok(o?.kind === 'rejected');
  assert.equal(o.rejection.retryAfterSeconds, Math.ceil(3940 / learned));
});

test('a queued request whose deadline passes is shed then, with the same honest Retry-After', () => {
  // 20 running per replica: 800 tokens/s, 360 short: 0.45 s expected, within standard's 2 s.
  const h = harness(two({ usage: 0.9, running: 20 }, { usage: 0.9, running: 20 }));
  h.ask('r');
  assert.equal(kindOf(h, 'r'), 'pending');
  h.clock.advance(1999);
  assert.equal(kindOf(h, 'r'), 'pending');
  h.clock.advance(1);
  const o = h.outcomes.get('r');
  assert.ok(o?.kind === 'rejected');
  assert.equal(o.shed, 'deadline_passed');
  assert.equal(o.queuedMs, 2000);
  assert.equal(o.rejection.retryAfterSeconds, 1);
  assert.equal(h.adm.pool('p').queueDepth, 0);
  assert.equal(h.clock.pendingTimers, 0, 'no timer left behind an empty queue');
});

test('cancel while queued: leaves the queue at once, and the request behind it is pumped', () => {
  // usage 0.5: room 800 + 800 − 480 = 1,120.
  const h = harness(two({ usage: 0.5, running: 20 }, { usage: 0.5, running: 20 }));
  const big = h.ask('big', { tier: 'premium', promptTokens: 1100, n: 4 }); // need 1,500
  h.ask('small', { tier: 'standard' }); // need 200, but 1,500 is queued ahead of it
  assert.deepEqual([kindOf(h, 'big'), kindOf(h, 'small')], ['pending', 'pending']);
  h.clock.advance(250);
  h.adm.cancel(big);
  const o = h.outcomes.get('big');
  assert.ok(o?.kind === 'cancelled');
  assert.equal(o.queuedMs, 250);
  assert.equal(kindOf(h, 'small').split(':')[0], 'admitted');
  h.adm.cancel(big); // twice: nothing happens
  assert.equal(h.adm.pool('p').queueDepth, 0);
});

test('a request larger than every replica\'s whole KV gets 400 context_length_exceeded at once', () => {
  const specs = (): Spec[] => [
    { id: 'a', blocks: 100, usage: 0 },
    { id: 'b', blocks: 200, usage: 0, scrapedAt: 1 }, // stale: its size still says what can ever fit
  ];
  const cases: Array<[number, number, string]> = [
    [3000, 200, 'pending'], // 3,200 fits b's whole KV (not its free space, which is unknown while stale)
    [3000, 201, 'rejected:context_length_exceeded'],
  ];
  for (const [prompt, max, want] of cases) {
    const h = harness(specs());
    h.ask('r', { promptTokens: prompt, maxTokens: max, tier: 'batch' });
    if (want === 'pending') {
      assert.notEqual(kindOf(h, 'r'), 'rejected:context_length_exceeded');
      continue;
    }
    assert.equal(kindOf(h, 'r'), want);
    const o = h.outcomes.get('r');
    assert.ok(o?.kind === 'rejected');
    assert.equal(o.rejection.param, 'messages');
    assert.equal(o.shed, null);
    assert.match(o.rejection.message ?? '', /maximum context length is 3200 tokens\. However, you requested 3201 tokens \(3000 in the messages, 201 in the completion\)/);
  }
});

test('pump on a new scrape: a queued request is admitted at the next poll after the replicas report room', () => {
  const h = harness(two({ usage: 0.9, running: 20 }, { usage: 0.9, running: 20 }));
  h.ask('r');
  h.clock.advance(300);
  assert.equal(kindOf(h, 'r'), 'pending');
  h.fleet.scrape({ a: 0.2, b: 0.2 });
  h.clock.advance(100);
  const o = h.outcomes.get('r');
  assert.ok(o?.kind === 'admitted');
  assert.equal(o.queuedMs, 400);
});

test('a pool with no healthy replica is unroutable at once, and a queued request whose pool empties leaves the queue', () => {
  const h = harness(two({ healthy: false }, { healthy: false }));
  h.ask('r');
  assert.equal(kindOf(h, 'r'), 'unroutable:no_healthy_replica');
  const g = harness(two({ usage: 0.9, running: 20 }, { usage: 0.9, running: 20 }));
  g.ask('q');
  g.fleet.specs[0]!.healthy = false;
  g.fleet.specs[1]!.healthy = false;
  g.fleet.scrape({ a: 0, b: 0 });
  g.clock.advance(100);
  assert.equal(kindOf(g, 'q'), 'unroutable:no_healthy_replica');
});

test('metrics: admitted, queued and shed counted per pool', () => {
  const counts: string[] = [];
  const h = harness(two({ usage: 0.9, running: 1 }, { usage: 0.9, running: 1 }));
  (h.adm as unknown as { deps: { metrics: unknown } }).deps.metrics = { admission: (pool: string, r: string) => counts.push(`${pool}:${r}`), shed: () => undefined };
  h.ask('shed', { tier: 'premium' });
  h.ask('queued', { tier: 'batch' });
  h.fleet.scrape({ a: 0, b: 0 });
  h.clock.advance(100);
  assert.deepEqual(counts, ['p:shed', 'p:queued', 'p:admitted']);
});

test('a queue whose requests keep missing their deadline sheds new arrivals at once, not after their allowance', () => {
  // The policy never finds a fitting replica (compute, not KV, is short): every queued request waits out its
  // 2 s allowance. Once most of the recent leavers missed, a new request gets its 429 on arrival.
  const policy = new ScriptedPolicy();
  policy.fits = false;
  const h = harness(two({ running: 20 }, { running: 20 }), { policy });
  for (let k = 0; k < 8; k++) {
    h.fleet.scrape({}); // rows stay fresh: the replicas answer, they are just busy
    h.ask(`m${k}`);
    assert.equal(kindOf(h, `m${k}`), 'pending', `m${k} is queued while the record is clean`);
    h.clock.advance(2000);
    assert.equal(kindOf(h, `m${k}`), 'rejected:server_overloaded');
  }
  h.fleet.scrape({});
  h.ask('keep'); // the queue must hold someone for the record to apply
  h.ask('fast');
  const o = h.outcomes.get('fast');
  assert.ok(o?.kind === 'rejected', kindOf(h, 'fast'));
  assert.equal(o.shed, 'queue_missing');
  assert.equal(o.queuedMs, 0, 'answered on arrival');
  assert.equal(o.rejection.retryAfterSeconds, 2, 'Retry-After: when the request queued ahead of it (2 s allowance) has left');
  // Capacity returns: the queued one is admitted, the record improves, and arrivals queue again.
  policy.fits = true;
  h.clock.advance(100);
  assert.equal(kindOf(h, 'keep').split(':')[0], 'admitted');
});

test('work conservation: an idle replica takes what the policy calls unfit, at arrival and from the queue', () => {
  const policy = new ScriptedPolicy();
  policy.fits = false; // the policy finds every replica unfit (a compute-bound pool, say)
  const h = harness(two({ running: 0 }, { running: 0 }), { policy });
  h.ask('w1', { tier: 'batch' });
  h.ask('w2', { tier: 'batch' });
  assert.equal(kindOf(h, 'w1'), 'admitted:a', 'nothing runs on a: it takes the request');
  assert.equal(kindOf(h, 'w2'), 'admitted:b');
  h.ask('w3', { tier: 'batch' });
  assert.equal(kindOf(h, 'w3'), 'pending', 'no replica idle: queued');
  h.finish('w1');
  assert.equal(kindOf(h, 'w3'), 'admitted:a', 'a is idle again (the ledger, and a row showing nothing running): the queue\'s head takes it');
});

test('work conservation: a row showing only work of ours, all ended since, is idle before the next scrape', () => {
  const policy = new ScriptedPolicy();
  policy.fits = false;
  const h = harness(two({ running: 0 }, { running: 0 }), { policy });
  h.ask('w1', { tier: 'batch' });
  h.ask('w2', { tier: 'batch' });
  h.ask('w3', { tier: 'batch' });
  assert.equal(kindOf(h, 'w2'), 'admitted:b');
  // The next scrape sees a request running on each: on a, the one this gateway had there as it scraped; on b,
  // two where this gateway had one (the other is someone else's).
  h.fleet.specs[0]!.running = 1;
  h.fleet.specs[0]!.inflightAtScrape = 1;
  h.fleet.specs[0]!.usage = 0.5;
  h.fleet.specs[1]!.running = 2;
  h.fleet.specs[1]!.inflightAtScrape = 1;
  h.fleet.scrape();
  assert.equal(kindOf(h, 'w3'), 'pending');
  h.finish('w2');
  h.clock.advance(50);
  assert.equal(kindOf(h, 'w3'), 'pending', 'b still runs a request that is not ours: not idle');
  h.finish('w1');
  assert.equal(kindOf(h, 'w3'), 'admitted:a', 'everything the row showed on a was ours and has ended: idle at once, its KV free');
});
