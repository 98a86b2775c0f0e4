// kv-aware through the Router: prefix affinity, a hot prefix kept by its holder past the cold bound within the warm one, a hot prefix copied to
// the replica of least predicted TTFT, headroom and TPOT avoidance, stale rows last, cold placement by rendezvous (agreed by independent routers, moved only for
// the removed replica's keys), and the feedback hooks (correction, reply blocks, restart, learned rate).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { GpuPrediction } from '../../../src/gpu-time/gpu-prediction.ts';
import { Router, createPolicy } from '../../../src/router/route.ts';
import type { KvAwarePolicy } from '../../../src/router/policies/kv-aware.ts';
import type { Decision, RouteRequest } from '../../../src/router/types.ts';
import { FixtureFleet, fixtureConfig, hashes, request } from './fleet-fixture.ts';

const IDS = ['r0', 'r1', 'r2', 'r3'];

function setup(ids = IDS, engine: Record<string, unknown> = {}): { fleet: FixtureFleet; router: Router; policy: KvAwarePolicy } {
  const fleet = new FixtureFleet(ids);
  const policy = createPolicy(fixtureConfig(ids, {}, engine), fleet) as KvAwarePolicy;
  return { fleet, router: new Router(policy, fleet, null, null, policy.gpu), policy };
}

function route(router: Router, req: RouteRequest): Decision {
  const res = router.route(req);
  assert.ok(res.ok, 'routed');
  return res.decision;
}

/** Routes and dispatches (ledger + feedback), as the pipeline does. */
function send(fleet: FixtureFleet, router: Router, req: RouteRequest): Decision {
  const d = route(router, req);
  fleet.ledger.dispatch(d.slot, req.promptTokens, req.maxTokens, 16, req.promptTokens - d.cachedBlocks * 16);
  router.dispatched(req, d);
  return d;
}

void test('a request sharing a held prefix goes to its holder, with cached blocks, predicted TTFT and kv_after', () => {
  const { fleet, router } = setup();
  const first = send(fleet, router, request(hashes(125, 7, 125)));
  assert.equal(first.why, 'cold');
  fleet.ledger.resetSlot(first.slot);
  const d = route(router, request(hashes(140, 7, 125)));
  assert.equal(d.slot, first.slot);
  assert.equal(d.why, 'prefix');
  assert.equal(d.cachedBlocks, 125);
  assert.equal(d.promptBlocks, 140);
  assert.ok(d.fits);
  assert.ok(d.predictedTtftMs > 10 && d.predictedTtftMs < 40, `${d.predictedTtftMs}`);
  assert.ok(d.kvAfter > 0 && d.kvAfter < 0.05);
  assert.match(router.header(request(hashes(140, 7, 125)), d), /policy=kv-aware; cached_blocks=125; prompt_blocks=140; .*predicted_ttft_ms=\d+; kv_after=0\.\d\d; why=prefix/);
});

void test('a hot prefix stays with its holder past the cold bound, within the looser warm one, while the holder serves it soonest; a cold prompt is kept within the cold bound', () => {
  const { fleet, router } = setup();
  for (const slot of fleet.members) fleet.ledger.firstToken(fleet.ledger.dispatch(slot, 0, 400, 16)); // background decode work
  const sys = (i: number): RouteRequest => request(hashes(130, 11, 125, 1000 + i), { maxTokens: 200 });
  const outstanding = (slot: number): number => fleet.ledger.get(slot, 3);
  const first = route(router, sys(0));
  assert.equal(first.why, 'cold');
  fleet.ledger.firstToken(fleet.ledger.dispatch(first.slot, sys(0).promptTokens, 200, 16));
  router.dispatched(sys(0), first);
  const holder = first.slot;
  // Where the holder stands against each bound for a request (ε = 0.25 cold, 1 warm; the mean includes it).
  const past = (add: number, factor: number): boolean => {
    const sum = fleet.members.reduce((a, s) => a + outstanding(s), 0) + add;
    return outstanding(holder) + add > (factor * sum) / fleet.members.length;
  };
  let pastCold = 0;
  let overflow = 0;
  for (let i = 1; i < 16; i++) {
    const req = sys(i);
    const add = req.promptTokens - 125 * 16 + req.maxTokens;
    const beyondCold = past(add, 1.25);
    const beyondWarm = past(add, 2);
    const d = route(router, req);
    if (!beyondWarm) {
      // The holder, or once the prefix has overflowed, another holder: never a replica that prefills it again.
      if (overflow === 0) assert.equal(d.slot, holder, `request ${i}, within the warm bound, left the holder (${d.why})`);
      assert.equal(d.why, 'prefix');
      assert.equal(d.cachedBlocks, 125);
      if (beyondCold && d.slot === holder) pastCold++;
    } else if (d.slot !== holder) {
      // Past the warm bound (the filter itself: kv-aware-pieces.test.ts) the overflow goes elsewhere.
      overflow++;
    }
    fleet.ledger.firstToken(fleet.ledger.dispatch(d.slot, req.promptTokens, req.maxTokens, 16, req.promptTokens - d.cachedBlocks * 16));
    router.dispatched(req, d);
  }
  assert.ok(pastCold >= 3, `the holder kept ${pastCold} requests past the cold bound`);
  assert.ok(overflow >= 1, `${overflow} requests overflowed once the holder was past the warm bound`);
  // A cold prompt is placed by rendezvous weight, blind to load: the cold bound keeps it off a loaded replica.
  let checked = 0;
  for (let i = 0; i < 12; i++) {
    const req = request(hashes(40, 500 + i));
    const add = req.promptTokens + req.maxTokens;
    const loaded = fleet.members.filter((s) => {
      const sum = fleet.members.reduce((a, x) => a + outstanding(x), 0) + add;
      return outstanding(s) > 0 && outstanding(s) + add > (1.25 * sum) / fleet.members.length;
    });
    const d = send(fleet, router, req);
    assert.equal(d.why === 'cold' || d.why === 'load-bound', true, d.why);
    if (loaded.length > 0 && loaded.length < fleet.members.length) {
      checked++;
      assert.ok(!loaded.includes(d.slot), `cold prompt ${i} went past the cold bound`);
    }
  }
  assert.ok(checked >= 6, `a replica was past the cold bound for ${checked} of 12 cold prompts`);
});

void test('a holder past its KV headroom is avoided while another fits; when none fits, fits is false', () => {
  const { fleet, router } = setup();
  const req = request(hashes(125, 21));
  const first = send(fleet, router, req);
  fleet.ledger.resetSlot(first.slot);
  fleet.rows[first.slot]!.kvUsage = 0.86; // past 1 − headroom_ratio (0.15)
  const d = route(router, request(hashes(125, 21)));
  assert.notEqual(d.slot, first.slot);
  assert.equal(d.why, 'headroom');
  assert.ok(d.fits);
  for (const r of fleet.rows) r.kvUsage = 0.9;
  const full = route(router, request(hashes(125, 21)));
  assert.equal(full.fits, false);
  assert.ok(full.kvAfter > 0.85);
});

void test('a replica whose decode step would pass the TPOT target is avoided', () => {
  const { fleet, router } = setup(IDS, { tpot_target_ms: 20 });
  const first = send(fleet, router, request(hashes(60, 31)));
  fleet.ledger.resetSlot(first.slot);
  Object.assign(fleet.rows[first.slot]!, { running: 255, kvUsage: 0.5 }); // 256 sequences, 80k tokens: 23.7 ms
  const d = route(router, request(hashes(60, 31)));
  assert.notEqual(d.slot, first.slot);
  assert.equal(d.why, 'headroom');
});

void test('a holder whose row is stale is ranked after every fresh replica', () => {
  const { fleet, router } = setup();
  const first = send(fleet, router, request(hashes(125, 41)));
  fleet.ledger.resetSlot(first.slot);
  fleet.rows[first.slot]!.lastGoodScrapeMs = 1;
  const d = route(router, request(hashes(125, 41)));
  assert.notEqual(d.slot, first.slot);
  for (const r of fleet.rows) r.lastGoodScrapeMs = 1;
  const allStale = route(router, request(hashes(125, 41)));
  assert.equal(allStale.slot, first.slot, 'among stale rows the prefix still counts');
  assert.ok(Number.isNaN(allStale.kvAfter));
});

void test('two independent routers place a new prefix on the same replica; a template-only match spreads', () => {
  const a = setup(IDS);
  const b = setup([...IDS].reverse()); // another gateway: different slot numbers for the same ids
  const template = (i: number): RouteRequest => request(hashes(40, 5, 2, 777 + i)); // only 2 blocks shared
  const placed = new Set<string>();
  for (let i = 0; i < 24; i++) {
    const da = send(a.fleet, a.router, template(i));
    const db = send(b.fleet, b.router, template(i));
    assert.equal(a.fleet.ids[da.slot], b.fleet.ids[db.slot], `prompt ${i}`);
    assert.equal(da.why, 'cold');
    placed.add(a.fleet.ids[da.slot]!);
    a.fleet.ledger.resetSlot(da.slot);
    b.fleet.ledger.resetSlot(db.slot);
  }
  assert.equal(placed.size, 4, 'prompts sharing only the template opening use the whole pool');
});

void test('removing a replica moves only the new prefixes it would have held', () => {
  const before = setup(IDS);
  const after = setup(['r0', 'r1', 'r3']);
  let moved = 0;
  for (let i = 0; i < 200; i++) {
    const req = request(hashes(20, 9000 + i));
    const was = before.fleet.ids[route(before.router, req).slot]!;
    const now = after.fleet.ids[route(after.router, req).slot]!;
    if (was !== 'r2') assert.equal(now, was, `prompt ${i} stays on ${was}`);
    else moved++;
  }
  assert.ok(moved > 20 && moved < 90, `r2 held ${moved} of 200`);
});

void test('finished with fewer cached tokens than predicted truncates the holder past the reported point', () => {
  const { fleet, router } = setup();
  const req = request(hashes(100, 51));
  fleet.ledger.resetSlot(send(fleet, router, req).slot);
  const d = route(router, request(hashes(100, 51)));
  assert.equal(d.cachedBlocks, 100);
  router.finished(request(hashes(100, 51)), d, 40 * 16, null);
  const again = route(router, request(hashes(100, 51)));
  assert.equal(again.slot, d.slot);
  assert.equal(again.cachedBlocks, 40);
  router.finished(request(hashes(100, 51)), again, 40 * 16, null);
  assert.equal(route(router, request(hashes(100, 51))).cachedBlocks, 40, 'a report matching the prediction changes nothing');
});

void test('a finished reply extends the chain, so the next turn hits the prompt and the reply', () => {
  const { fleet, router } = setup();
  const turn2 = hashes(90, 61, 60); // turn 1 prompt: 50 blocks; reply: blocks 50..59; new user text after
  const turn1 = request(turn2.slice(0, 50));
  const d1 = send(fleet, router, turn1);
  router.finished(turn1, d1, 0, turn2.slice(50, 60));
  fleet.ledger.resetSlot(d1.slot);
  const d2 = route(router, request(turn2));
  assert.equal(d2.slot, d1.slot);
  assert.equal(d2.cachedBlocks, 60);
});

void test('a replica reset forgets its prefixes: the next request is cold again', () => {
  const { fleet, router, policy } = setup();
  const first = send(fleet, router, request(hashes(80, 71)));
  fleet.ledger.resetSlot(first.slot);
  router.replicaReset(first.slot);
  const d = route(router, request(hashes(80, 71)));
  assert.equal(d.why, 'cold');
  assert.equal(d.cachedBlocks, 0);
  assert.equal(policy.gpu.rates.rate(first.slot, 1), 1, 'its learned rate is forgotten too');
});

void test('first tokens teach the replica its prefill rate, which the next prediction uses', () => {
  const { fleet, router, policy } = setup();
  const req = request(hashes(250, 81), { promptTokens: 4000 });
  const d = send(fleet, router, req);
  const own = 4000 + 1.872e-5 * 4000 * 4000; // the prompt's tokens and its attention's square term
  assert.ok(Math.abs(d.workAheadTokens - own) < 1e-6, String(d.workAheadTokens));
  const fixed = d.predictedTtftMs - d.predictedPrefillMs;
  for (let i = 0; i < 20; i++) {
    d.gpuPrefilled = false;
    router.firstToken(req, d, fixed + own / 6); // 6,000 tok/s observed
  }
  const learned = policy.gpu.rates.rate(d.slot, 12);
  assert.ok(Math.abs(learned - 6) < 0.1, `learned ${learned} tokens/ms`);
  router.firstToken(req, d, fixed + own / 600); // one absurd sample does not move the median
  assert.ok(Math.abs(policy.gpu.rates.rate(d.slot, 12) - learned) < 1e-9);
  fleet.ledger.resetSlot(d.slot);
  const next = route(router, request(hashes(10, 82), { promptTokens: 6000, pinned: d.slot }));
  assert.ok(Math.abs(next.predictedPrefillMs - (6000 + 1.872e-5 * 6000 * 6000) / 6) < 1, String(next.predictedPrefillMs));
});

void test('a prompt passes its load bound (cold 0.25, warm 1) only for a replica that fits when none within it does, a warm one stays past the cold bound, and never goes where it does not fit while a replica fits, under a random mix of hot and cold prefixes, sizes and completions', () => {
  const ids = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'];
  const { fleet, router, policy } = setup(ids);
  let seed = 12345;
  const rnd = (): number => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32);
  const live: Array<ReturnType<typeof fleet.ledger.dispatch>> = [];
  const out = new Int32Array(ids.length);
  let overs = 0;
  let fallbacks = 0;
  let pastToFit = 0;
  let warmPast = 0;
  let warmMisfits = 0;
  for (let i = 0; i < 3000; i++) {
    const hot = rnd() < 0.6;
    const blocks = 1 + Math.floor(rnd() * (hot ? 200 : 500));
    const req = request(hot ? hashes(blocks + 120, 4242, 120, i) : hashes(blocks, 100_000 + i), { maxTokens: 16 + Math.floor(rnd() * 1000) });
    const outstanding = fleet.members.map((s) => fleet.ledger.get(s, 3));
    policy.index.lookup(req.blockHashes, fleet.members, out);
    const adds = fleet.members.map((_, k) => req.promptTokens - out[k]! * 16 + req.maxTokens);
    const sum = outstanding.reduce((x, y) => x + y, 0);
    // Warm (more than cold_prefix_blocks held somewhere): the looser bound (warm_load_bound_epsilon 1), else 0.25.
    const warm = Math.max(...out) > 2;
    const factor = warm ? 2 : 1.25;
    const within = fleet.members.map((_, k) => outstanding[k]! + adds[k]! <= factor * (sum + adds[k]!) / ids.length);
    const d = route(router, req);
    const k = fleet.members.indexOf(d.slot);
    if (warm) {
      if (outstanding[k]! > 0 && outstanding[k]! + adds[k]! > 1.25 * (sum + adds[k]!) / ids.length) warmPast++;
      if (!d.fits) {
        const again = router.route({ ...req, excluded: [d.slot] });
        if (again.ok && again.decision.fits) warmMisfits++;
      }
    }
    if (outstanding[k]! > 0 && !within[k]) {
      const noneWithin = !within.some((w, j) => w || outstanding[j] === 0);
      if (noneWithin && outstanding[k]! <= 1.25 * (sum + adds[k]!) / ids.length) fallbacks++;
      else if (!d.fits) overs++;
      else {
        // Past the bound to a replica that fits: only when every replica within the bound (or idle) misses.
        // Asked again without it, the policy finds none within the bound that fits.
        const again = router.route({ ...req, excluded: [d.slot] });
        const j = again.ok ? fleet.members.indexOf(again.slot) : -1;
        if (again.ok && again.decision.fits && (within[j]! || outstanding[j] === 0)) overs++;
        else pastToFit++;
      }
    }
    live.push(fleet.ledger.dispatch(d.slot, req.promptTokens, req.maxTokens, 16, req.promptTokens - d.cachedBlocks * 16));
    router.dispatched(req, d);
    if (rnd() < 0.3) fleet.ledger.firstToken(live[Math.floor(rnd() * live.length)]!);
    while (live.length > 0 && rnd() < 0.5) fleet.ledger.end(live.splice(Math.floor(rnd() * live.length), 1)[0]!);
  }
  assert.equal(overs, 0, 'no replica took a request past its bound (cold 0.25, warm 1) while another within it fitted');
  assert.equal(warmMisfits, 0, 'no warm request went where it did not fit while another replica fitted');
  assert.ok(warmPast >= 10, `${warmPast} warm requests stayed with a replica past the bound`);
  assert.ok(fallbacks < 150, `${fallbacks} requests too big for any busy replica's bound`);
  assert.ok(pastToFit < 300, `${pastToFit} requests past the bound to the one replica that fitted`);
});

void test('a hot prefix past its holder goes to the replica with the least predicted TTFT, cold prefill included, then serves it there', () => {
  // For each choice of the idle replica: r0 holds a 16,000-token prefix and has 40,000 tokens of its prefill
  // queued; the two others have 2,000 and 1,000 tokens of other work queued (sent by another thread: the
  // ledger's). The overflow goes to the idle one, whose cold prefill is the cheapest first token, not to one
  // picked at random, and the next request of that prefix follows it there as a prefix hit.
  for (const idle of [1, 2, 3]) {
    const { fleet, router, policy } = setup();
    const hot = (i: number): RouteRequest => request(hashes(1002, 21, 1000, 5000 + i), { maxTokens: 50 });
    for (let i = 0; i < 3; i++) {
      const req = hot(i);
      const d = route(router, req);
      d.slot = 0;
      d.cachedBlocks = i === 0 ? 0 : 1000;
      fleet.ledger.dispatch(0, req.promptTokens, req.maxTokens, 16, i === 0 ? req.promptTokens : 40_000 / 2);
      router.dispatched(req, d);
    }
    const others = [1, 2, 3].filter((s) => s !== idle);
    fleet.ledger.dispatch(others[0]!, 2_000, 50, 16);
    fleet.ledger.dispatch(others[1]!, 1_000, 50, 16);

    const req = hot(10);
    const p = new GpuPrediction();
    const ttft = [0, 1, 2, 3].map((s) => policy.gpu.predict(req, s, s === 0 ? 1000 : 0, p).ttftMs);
    const d = route(router, req);
    assert.equal(d.slot, idle, `idle r${idle}: predicted TTFT ${ttft.map((x) => x.toFixed(0)).join(', ')} ms, chose r${d.slot} (${d.why})`);
    assert.equal(d.cachedBlocks, 0);
    for (const s of [0, ...others]) assert.ok(ttft[idle]! < ttft[s]!, `r${idle} ${ttft[idle]} ms < r${s} ${ttft[s]} ms`);
    const copy = fleet.ledger.dispatch(d.slot, req.promptTokens, req.maxTokens, 16);
    router.dispatched(req, d);

    // Once the copy's prefill is done (its first token back, 3 s later), the prefix's next request is a
    // prefix hit there rather than another cold copy.
    fleet.now += 3_000;
    fleet.ledger.firstToken(copy);
    const next = route(router, hot(11));
    assert.equal(next.slot, idle, `the new copy serves the next request of the prefix (${next.why})`);
    assert.equal(next.cachedBlocks, 1000);
    assert.equal(next.why, 'prefix');
  }
});

void test('a prompt whose prefill would push a short stream past its TPOT goes where no stream is harmed; when every replica would, it does not fit', () => {
  const { fleet, router, policy } = setup(['r0', 'r1']);
  // r0: a 5-token stream decoding (4 gaps: about 130 ms of slack at a 45 ms target); r1: a 320-token prompt
  // queued, no stream decoding. A 2,000-token prompt (~170 ms of prefill; a 1 s TTFT budget, so both fit it)
  // is predicted faster on r0 and would stall the short stream past its target there.
  const short = request(hashes(10, 1), { promptTokens: 160, maxTokens: 5, pinned: 0 });
  router.firstToken(short, send(fleet, router, short), 20);
  send(fleet, router, request(hashes(20, 2), { promptTokens: 320, maxTokens: 100, pinned: 1 }));
  const big = request(hashes(0, 3), { promptTokens: 2000, maxTokens: 20, ttftBudgetMs: 1000 });
  const p0 = policy.gpu.predict(big, 0, 0, new GpuPrediction());
  const p1 = policy.gpu.predict(big, 1, 0, new GpuPrediction());
  assert.ok(p0.ttftMs < p1.ttftMs, `${p0.ttftMs} ${p1.ttftMs}`);
  assert.equal(p0.harm, 1);
  assert.equal(p1.harm, 0);
  const d = route(router, big);
  assert.equal(d.slot, 1);
  assert.ok(d.fits);
  // A short stream on r1 as well: nowhere fits now (admission queues it until one of them ends).
  const short1 = request(hashes(10, 4), { promptTokens: 160, maxTokens: 5, pinned: 1 });
  router.firstToken(short1, send(fleet, router, short1), 20);
  assert.equal(route(router, big).fits, false);
});
