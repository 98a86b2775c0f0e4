// Admission in GPU time (gpu-fit.ts over the GPU-time model), in virtual time: a request the picked replica
// can start within its tier's TTFT is admitted at once; one it cannot start in time even after waiting is
// shed at arrival with a Retry-After from the model's wait (whole seconds, at least 1); one held back only by
// TPOT (prefill arriving faster than the batch can bear) is queued when its tier's budget covers the wait
// (batch) and shed when it does not (standard), and the queue admits it once ρ has decayed. Any policy's
// pick is judged as it stands; kv-aware picks the replica that fits. Defaults: 8B figures, TTFT budgets
// premium/standard 400 ms and batch 10 s, ttft_margin 0.5, tpot_margin 0.6.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { GpuPrediction, waitUntilFits } from '../../../src/gpu-time/gpu-time-model.ts';
import { GpuFit } from '../../../src/admission/gpu-fit.ts';
import { ttftLimitMs } from '../../../src/router/filters/headroom-filter.ts';
import { createPolicy } from '../../../src/router/route.ts';
import { Decision, type RouteRequest } from '../../../src/router/types.ts';
import { harness, kindOf, ScriptedPolicy, type Harness, type Spec } from './fixture.ts';

const big = (id: string): Spec => ({ id, blocks: 100_000, usage: 0, running: 0 });

/** Prefill work sent to `slot` behind admission's back (another acceptor thread's or gateway's requests). */
function sendAround(h: Harness, slot: number, promptTokens: number, n: number): Array<{ req: RouteRequest; d: Decision }> {
  const out: Array<{ req: RouteRequest; d: Decision }> = [];
  for (let i = 0; i < n; i++) {
    const req: RouteRequest = { poolId: 'p', adapter: null, promptTokens, maxTokens: 100, blockHashes: new Float64Array(0), excluded: [] };
    const d = new Decision();
    d.slot = slot;
    h.fleet.ledger.dispatch(slot, promptTokens, 100, 16);
    h.router.dispatched(req, d);
    out.push({ req, d });
  }
  return out;
}

function rejection(h: Harness, name: string): { code: string; retryAfterSeconds: number | undefined; queuedMs: number } {
  const o = h.outcomes.get(name);
  assert.ok(o !== undefined && o.kind === 'rejected', `${name}: ${kindOf(h, name)}`);
  return { code: o.rejection.code, retryAfterSeconds: o.rejection.retryAfterSeconds, queuedMs: o.queuedMs };
}

test('an idle replica takes the request at once, with the model\'s prediction recorded for learning', () => {
  const h = harness([big('a')], { gpuTime: true });
  h.ask('r', { promptTokens: 1000 });
  assert.equal(kindOf(h, 'r'), 'admitted:a');
  const o = h.outcomes.get('r')!;
  assert.ok(o.kind === 'admitted' && o.decision.gpuTtftMs > 80 && o.decision.gpuTtftMs < 120, String(o.kind === 'admitted' && o.decision.gpuTtftMs));
});

test('TTFT out of reach: shed at arrival, Retry-After the time the queue ahead needs to drain, at least 1 s', () => {
  const h = harness([big('a')], { gpuTime: true });
  const sheds: string[] = [];
  (h.adm as unknown as { deps: { metrics: unknown } }).deps.metrics = { admission: () => undefined, shed: (pool: string, when: string) => sheds.push(`${pool}:${when}`) };
  sendAround(h, 0, 4000, 10); // ~3.4 s of prefill ahead
  const p = h.gpu.predict({ poolId: 'p', adapter: null, promptTokens: 1000, maxTokens: 100, blockHashes: new Float64Array(0), excluded: [] }, 0, 0, new GpuPrediction());
  h.ask('late', { promptTokens: 1000 });
  const r = rejection(h, 'late');
  assert.equal(r.code, 'server_overloaded');
  assert.equal(r.queuedMs, 0, 'answered at arrival');
  assert.equal(r.retryAfterSeconds, Math.ceil((p.ttftMs - 0.5 * 400) / 1000), `predicted TTFT ${p.ttftMs} ms`);
  assert.ok(r.retryAfterSeconds! >= 3);
  assert.deepEqual(sheds, ['p:arrival']);
  assert.equal(h.adm.pool('p').queueDepth, 0, 'nothing queued: waiting would not make it in time');

  const near = harness([big('a')], { gpuTime: true });
  sendAround(near, 0, 2000, 2); // just past the budget: Retry-After is still a whole second
  near.ask('r', { promptTokens: 1000 });
  assert.equal(rejection(near, 'r').retryAfterSeconds, 1);
});

test('nothing unseen there: a request is admitted past the margin when its worst case meets the budget, not when something decodes', () => {
  // Idle replica, 1,500-token prompts: the first fits the margin (~140 ms ≤ 200); the second (~280 ms, at
  // worst ~360 with a later chunk filling its last step) only its worst case; the third (~420) neither.
  const h = harness([big('a')], { gpuTime: true });
  for (const name of ['r1', 'r2', 'r3']) h.ask(name, { promptTokens: 1500 });
  assert.equal(kindOf(h, 'r1'), 'admitted:a');
  assert.equal(kindOf(h, 'r2'), 'admitted:a');
  assert.equal(rejection(h, 'r3').code, 'server_overloaded');
  const p = h.gpu.predict({ poolId: 'p', adapter: null, promptTokens: 1500, maxTokens: 100, blockHashes: new Float64Array(0), excluded: [] }, 0, 0, new GpuPrediction());
  assert.ok(p.seenWhole && p.ttftMs > 400, `third: seen whole ${p.seenWhole}, ${p.ttftMs} ms`);

  // The same replica with sequences decoding (a step in progress of unseen length): held to the margin.
  const busy = harness([{ id: 'a', blocks: 100_000, usage: 0.01, running: 8 }], { gpuTime: true });
  busy.ask('r1', { promptTokens: 1500 });
  busy.ask('r2', { promptTokens: 1500 });
  assert.equal(kindOf(busy, 'r1'), 'admitted:a');
  assert.equal(rejection(busy, 'r2').code, 'server_overloaded');
});

/** A replica whose prompts have all been prefilled (nothing queued) but whose prefill share ρ is past what the batch can bear. */
function hot(h: Harness): void {
  const sent = sendAround(h, 0, 4000, 16); // 64k tokens of prefill in the 8 s window: ρ ≈ 0.72
  for (const { req, d } of sent) {
    h.fleet.ledger.firstToken({ slot: 0, promptTokens: 4000, wholePrompt: 4000, maxTokens: 100, expectTokens: 100, reserveTokens: 100, blocks: 0, blockSize: 16, outputTokens: 0, reply: null, sequences: 1, firstTokenSeen: false, ended: false });
    h.router.firstToken(req, d, 50);
  }
}

test('TPOT out of reach: a standard request is shed at arrival, a batch one queues and goes once ρ has decayed', () => {
  const h = harness([big('a')], { gpuTime: true });
  hot(h);
  const p = h.gpu.predict({ poolId: 'p', adapter: null, promptTokens: 1000, maxTokens: 100, blockHashes: new Float64Array(0), excluded: [] }, 0, 0, new GpuPrediction());
  assert.ok(p.ttftMs < 400 && p.tpotMs > 30, `ttft ${p.ttftMs}, tpot ${p.tpotMs}`);
  const wait = waitUntilFits(p, ttftLimitMs(p.ownTtftMs, 400, 0.5), 30);
  assert.ok(wait > 1000 && wait < 6000, `wait ${wait}`);

  h.ask('standard', { promptTokens: 1000 });
  const r = rejection(h, 'standard');
  assert.equal(r.queuedMs, 0);
  assert.equal(r.retryAfterSeconds, Math.ceil(wait / 1000));

  h.ask('batch', { promptTokens: 1000, tier: 'batch' });
  assert.equal(kindOf(h, 'batch'), 'pending', 'queued: its 10 s budget covers the wait');
  // The poller keeps the rows fresh meanwhile.
  const advance = (ms: number): void => {
    for (let left = ms; left > 0; left -= 100) {
      h.clock.advance(left < 100 ? left : 100);
      h.fleet.scrape();
    }
  };
  advance(wait - 200);
  assert.equal(kindOf(h, 'batch'), 'pending');
  advance(400);
  assert.equal(kindOf(h, 'batch'), 'admitted:a');
  const o = h.outcomes.get('batch')!;
  assert.ok(o.queuedMs >= wait - 100 && o.queuedMs <= wait + 200, `queued ${o.queuedMs} ms against ${wait}`);
});

test('any policy\'s pick is judged as it stands; kv-aware picks the replica that fits', () => {
  const scripted = harness([big('a'), big('b')], { gpuTime: true, policy: new ScriptedPolicy() });
  sendAround(scripted, 0, 4000, 10);
  sendAround(scripted, 1, 100, 1); // b serves one short request: not idle, but a 1,000-token prompt would fit there
  scripted.ask('r', { promptTokens: 1000 });
  assert.equal(rejection(scripted, 'r').code, 'server_overloaded', 'the anchor picked the busy replica: shed, though b would fit');
  // With b idle, work conservation takes it: an idle replica is never refused, whatever the policy picked.
  const idle = harness([big('a'), big('b')], { gpuTime: true, policy: new ScriptedPolicy() });
  sendAround(idle, 0, 4000, 10);
  idle.ask('r', { promptTokens: 1000 });
  assert.equal(kindOf(idle, 'r'), 'admitted:b');

  const kv = harness([big('a'), big('b')], { gpuTime: true });
  const policy = createPolicy({ ...kv.cfg, routing: { ...kv.cfg.routing, policy: 'kv-aware' } }, kv.fleet, undefined, kv.gpu);
  (kv.router as unknown as { policy: unknown }).policy = policy;
  sendAround(kv, 0, 4000, 10);
  kv.ask('r', { promptTokens: 1000 });
  assert.equal(kindOf(kv, 'r'), 'admitted:b');
});

test('kv-aware holds a prompt back from the short stream it would stall: shed at arrival when the stream ends too late for its allowance, queued when it does not', () => {
  const setup = (): Harness => {
    const h = harness([big('a')], { gpuTime: true });
    const policy = createPolicy({ ...h.cfg, routing: { ...h.cfg.routing, policy: 'kv-aware' } }, h.fleet, undefined, h.gpu);
    (h.router as unknown as { policy: unknown }).policy = policy;
    h.ask('short', { promptTokens: 160, maxTokens: 5 }); // a 5-token stream: ~140 ms of slack
    const o = h.outcomes.get('short')!;
    assert.ok(o.kind === 'admitted');
    h.clock.advance(20);
    h.router.firstToken({ poolId: 'p', adapter: null, promptTokens: 160, maxTokens: 5, blockHashes: new Float64Array(0), excluded: [] }, o.decision, 20);
    return h;
  };
  // A 1,700-token prompt (~146 ms of prefill; predicted TTFT ~175 ms, within the limit) would push it past
  // its TPOT. Standard tier: its allowance (half the 400 ms budget less its ~160 ms idle TTFT: 43 ms) is
  // shorter than the stream's remaining ~56 ms plus a 100 ms poll: shed now, not after waiting in the queue.
  const h = setup();
  h.ask('big', { promptTokens: 1700, maxTokens: 20 });
  const r = rejection(h, 'big');
  assert.equal(r.code, 'server_overloaded');
  assert.equal(r.queuedMs, 0, 'answered at arrival');
  assert.equal(h.adm.pool('p').queueDepth, 0);
  // Batch tier (10 s budget, a 4.8 s allowance): it waits for the stream to end, not for KV to drain (the
  // KV estimate, its need at the pool's fallback drain rate, is 81 s: past the allowance).
  const b = setup();
  b.ask('big', { promptTokens: 1700, maxTokens: 20, tier: 'batch' });
  assert.equal(b.outcomes.get('big'), undefined, 'queued');
  assert.equal(b.adm.pool('p').queueDepth, 1);
});

test('any policy\'s pick that would stall a short stream past its TPOT is held back by admission: shed at arrival past the allowance; a batch request waits for the stream to end, then is admitted', () => {
  // The harness's policy is least-outstanding-tokens: it has no notion of fit, so the rule is admission's.
  const h = harness([big('a')], { gpuTime: true });
  const shortReq: RouteRequest = { poolId: 'p', adapter: null, promptTokens: 160, maxTokens: 5, blockHashes: new Float64Array(0), excluded: [] };
  h.ask('short', { promptTokens: 160, maxTokens: 5 }); // a 5-token stream: ~140 ms of slack
  const o = h.outcomes.get('short')!;
  assert.ok(o.kind === 'admitted');
  h.clock.advance(20);
  h.router.firstToken(shortReq, o.decision, 20);
  // A 1,700-token prompt (~146 ms of prefill) fits the TTFT limit and the batch's mean TPOT, and would still
  // push the 5-token stream past its own TPOT: not admitted.
  const p = h.gpu.predict({ ...shortReq, promptTokens: 1700, maxTokens: 20 }, 0, 0, new GpuPrediction());
  assert.equal(p.harm, 1);
  h.ask('big', { promptTokens: 1700, maxTokens: 20 });
  const r = rejection(h, 'big');
  assert.equal(r.code, 'server_overloaded');
  assert.equal(r.queuedMs, 0, 'answered at arrival');
  h.ask('batch', { promptTokens: 1700, maxTokens: 20, tier: 'batch' });
  assert.equal(kindOf(h, 'batch'), 'pending', 'queued until the stream ends');
  assert.equal(h.adm.pool('p').queueDepth, 1);
  h.clock.advance(60);
  h.router.finished(shortReq, o.decision, 0, null);
  h.finish('short');
  assert.equal(kindOf(h, 'batch'), 'admitted:a', 'admitted once the stream it would have stalled ended');
});

test('kv-aware\'s scorer leaves the per-stream pass pending where TTFT or TPOT already fail, and its verdict is admission\'s on every replica', () => {
  // Three replicas with short streams decoding and prompts queued (uneven), then requests of every size
  // judged on each replica twice: as the scorer does (per-stream figures pending, verdict only) and as
  // admission's judge does (everything computed). The verdicts must agree, the lazy pass must run wherever it
  // decides the verdict, and stay pending where the TTFT already fails.
  const h = harness([big('a'), big('b'), big('c')], { gpuTime: true });
  let n = 0;
  const stream = (slot: number, promptTokens: number, maxTokens: number): void => {
    const req: RouteRequest = { poolId: 'p', adapter: null, promptTokens, maxTokens, blockHashes: new Float64Array(0), excluded: [] };
    const d = new Decision();
    d.slot = slot;
    h.fleet.ledger.dispatch(slot, promptTokens, maxTokens, 16);
    h.router.dispatched(req, d);
    h.clock.advance(5);
    if (n++ % 3 !== 2) h.router.firstToken(req, d, 5);
  };
  for (let i = 0; i < 4; i++) stream(0, 160, 5 + i);
  for (let i = 0; i < 6; i++) stream(1, 900 + 200 * i, 40);
  stream(2, 4000, 200);
  const fig = h.gpu.figures('p')!;
  const lazy = new GpuPrediction();
  const eager = new GpuPrediction();
  const fitLazy = new GpuFit();
  const fitEager = new GpuFit();
  let pending = 0;
  let harmDecided = 0;
  for (const promptTokens of [40, 160, 600, 1200, 1700, 2400, 3500, 6000]) {
    for (const maxTokens of [5, 50, 500]) {
      const req: RouteRequest = { poolId: 'p', adapter: null, promptTokens, maxTokens, blockHashes: new Float64Array(0), excluded: [] };
      const budget = h.gpu.budgetMs(req);
      for (let slot = 0; slot < 3; slot++) {
        h.gpu.predict(req, slot, 0, lazy, false);
        const v1 = fitLazy.decide(h.gpu, fig, req, slot, lazy, budget, 0, 0.5, 0.6, false);
        if (lazy.harmPending) pending++;
        h.gpu.predict(req, slot, 0, eager);
        const v2 = fitEager.decide(h.gpu, fig, req, slot, eager, budget, 0, 0.5, 0.6);
        assert.equal(v1, v2, `${promptTokens}/${maxTokens} on ${slot}`);
        assert.equal(fitLazy.certain, fitEager.certain);
        if (eager.harm > 0 && eager.tpotMs <= fitEager.tpotLimitMs && eager.ttftMs <= fitEager.limitMs) harmDecided++;
      }
    }
  }
  assert.ok(pending > 0, 'some candidates fail on TTFT or TPOT alone: their per-stream pass never ran');
  assert.ok(harmDecided > 0, 'some verdicts turn on the per-stream pass');
  // A pending prediction cannot be completed once another prediction has reset the model's stream query.
  const req: RouteRequest = { poolId: 'p', adapter: null, promptTokens: 6000, maxTokens: 5, blockHashes: new Float64Array(0), excluded: [] };
  h.gpu.predict(req, 2, 0, lazy, false);
  h.gpu.predict(req, 1, 0, eager, false);
  assert.throws(() => h.gpu.harmOf(lazy), /outlived its query/);
});
