// The GPU-time model in virtual time: hand-worked TTFT and TPOT predictions (queue ahead riding in decode
// steps, ρ from the prefill arriving), the wait until a request would fit, the learners' robustness (median
// window, Huber-weighted ridge fit), and convergence to a perturbed engine's own figures from noisy samples.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { GpuPrediction, GpuTimeModel, ARRIVAL_WINDOW_MS, waitUntilFits } from '../../../src/gpu-time/gpu-time-model.ts';
import { DecodeFit } from '../../../src/gpu-time/decode-fit.ts';
import { PoolFigures } from '../../../src/gpu-time/pool-figures.ts';
import { PrefillRates } from '../../../src/gpu-time/prefill-rate.ts';
import { Decision } from '../../../src/router/types.ts';
import { FixtureFleet, fixtureConfig, hashes, request } from '../router/fleet-fixture.ts';

const cfg = fixtureConfig(['a', 'b']);
/** Equivalent prefill tokens of positions a..b, 8B default attention coefficient. */
const work = (a: number, b: number): number => b - a + 1.872e-5 * (b * b - a * a);
/** The 8B default decode step. */
const step = (batch: number, kv: number): number => 10.5 + 0.025 * batch + 0.000085 * kv;
/** mulberry32: successive draws uncorrelated (an LCG's are not, which biases a fit over them). */
function prng(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Predicts `req` on `slot`, records the prediction in its decision as admission does, and dispatches it there. */
function send(model: GpuTimeModel, fleet: FixtureFleet, req: ReturnType<typeof request>, slot = 0): { d: Decision; e: ReturnType<FixtureFleet['ledger']['dispatch']> } {
  const p = model.predict(req, slot, 0, new GpuPrediction());
  const d = new Decision();
  d.slot = slot;
  d.gpuTtftMs = p.ttftMs;
  d.gpuStepsMs = p.stepsMs + p.residualMs + p.adapterMs;
  d.gpuWorkAhead = p.workAhead;
  d.gpuOwnWork = p.ownWork;
  const e = fleet.ledger.dispatch(slot, req.promptTokens, 100, 16);
  model.dispatched(slot, req, d);
  return { d, e };
}

function dispatch(model: GpuTimeModel, fleet: FixtureFleet, slot: number, promptTokens: number): Decision {
  return send(model, fleet, request(hashes(Math.floor(promptTokens / 16), slot * 1000 + promptTokens), { promptTokens }), slot).d;
}

void test('hand-worked: an idle replica, then three requests queued ahead', () => {
  const fleet = new FixtureFleet(['a', 'b']);
  const model = new GpuTimeModel(cfg.pools, fleet, 5000);
  const req = request(hashes(75, 1), { promptTokens: 1208 });
  const p = model.predict(req, 0, 0, new GpuPrediction());
  const own = work(0, 1208);
  // One step at batch 1 carries the whole prompt (1,235 < 2,048 tokens): its prefill plus the decode part.
  assert.ok(Math.abs(p.ttftMs - (own / 12 + step(1, 0))) < 1e-9, String(p.ttftMs));
  // TPOT once it joins: the step at batch 1 over its 82 blocks. Nothing decodes there, so its own prefill
  // (before its first token) stalls no one: ρ is 0.
  assert.equal(p.rho, 0);
  assert.ok(Math.abs(p.tpotMs - step(1, 82 * 16)) < 1e-9, String(p.tpotMs));

  for (let i = 0; i < 3; i++) dispatch(model, fleet, 0, 1208);
  const q = model.predict(req, 0, 0, new GpuPrediction());
  // 4 × 1,235 tokens ahead and own: 3 steps of 2,048 at batch 1 (no first token yet), reading the 3 × 82
  // reserved blocks; all four prompts' work over the rate; and, the replica being busy, half a mean step
  // (step / (1 − ρ of the three arrived)) left of the one in progress.
  const residual = 0.5 * step(1, 3 * 82 * 16) / (1 - 3 * own / (12 * ARRIVAL_WINDOW_MS));
  assert.ok(Math.abs(q.ttftMs - (4 * own / 12 + 3 * step(1, 3 * 82 * 16) + residual)) < 1e-9, String(q.ttftMs));
  // Those three will decode too: batch 4 for the TPOT, with 4 prompts' work arriving in the window.
  assert.ok(Math.abs(q.tpotMs - step(4, 4 * 82 * 16) / (1 - (4 * own) / (12 * ARRIVAL_WINDOW_MS))) < 1e-9, String(q.tpotMs));
  const other = model.predict(req, 1, 0, new GpuPrediction());
  assert.ok(Math.abs(other.ttftMs - p.ttftMs) < 1e-9, 'the other replica is still idle');
});

void test('the queue drains as the scheduler prefills it; a first token caps it to what was sent after', () => {
  const fleet = new FixtureFleet(['a', 'b']);
  const model = new GpuTimeModel(cfg.pools, fleet, 5000);
  const ds = [dispatch(model, fleet, 0, 2000), dispatch(model, fleet, 0, 2000), dispatch(model, fleet, 0, 2000)];
  const req = request(hashes(10, 9), { promptTokens: 160 });
  const before = model.predict(req, 0, 0, new GpuPrediction()).workAhead;
  fleet.now += 100;
  fleet.rows[0]!.lastGoodScrapeMs = fleet.now;
  const after = model.predict(req, 0, 0, new GpuPrediction()).workAhead;
  // Nothing decodes yet: steps of 2,048 prefill tokens, the drain rate 2,048 / (step at batch 1 + 2,048 / 12) per ms.
  const reserved = 3 * Math.ceil(2100 / 16) * 16;
  const drained = 100 * 2048 / (step(1, reserved) + 2048 / 12);
  assert.ok(Math.abs(before - after - drained) < 1e-6, `${before - after} against ${drained}`);
  // The second request's first token: only the third's work can remain ahead.
  fleet.ledger.firstToken({ slot: 0, promptTokens: 2000, wholePrompt: 2000, maxTokens: 100, expectTokens: 100, reserveTokens: 100, blocks: 132, blockSize: 16, outputTokens: 0, reply: null, sequences: 1, firstTokenSeen: false, ended: false });
  model.firstToken(0, request(hashes(125, 2000), { promptTokens: 2000 }), ds[1]!, 300, true);
  const left = model.predict(req, 0, 0, new GpuPrediction()).workAhead;
  assert.ok(Math.abs(left - (work(0, 2000) + work(0, 160))) < 1e-6, String(left));
});

void test('wait until it fits: the queue ahead drains in real time; a request that alone overruns never fits', () => {
  const fleet = new FixtureFleet(['a']);
  const model = new GpuTimeModel(fixtureConfig(['a']).pools, fleet, 5000);
  for (let i = 0; i < 6; i++) dispatch(model, fleet, 0, 2000);
  const p = model.predict(request(hashes(60, 5), { promptTokens: 1000 }), 0, 0, new GpuPrediction());
  assert.ok(p.ttftMs > 900);
  assert.ok(Math.abs(waitUntilFits(p, 360, 1000) - (p.ttftMs - 360)) < 1e-9);
  assert.equal(waitUntilFits(p, p.ttftMs + 1, 1000), 0);
  assert.equal(waitUntilFits(p, p.ownTtftMs - 1, 1000), Number.POSITIVE_INFINITY);
  // TPOT-bound: ρ decays with the window: wait = τ · ln(arriving ρ / the ρ the target leaves).
  const target = p.stepMs / (1 - p.rhoArriving / 2 - p.rhoOwn);
  assert.ok(Math.abs(waitUntilFits(p, 1e9, target) - ARRIVAL_WINDOW_MS * Math.log(2)) < 1e-6);
});

void test('prefill rate: the median of the last nine samples (the nominal rate filling a window not yet full), each clamped to 2× the estimate; reset returns to nominal', () => {
  const r = new PrefillRates(2);
  assert.equal(r.rate(0, 12), 12);
  r.observe(0, 600, 100, 12); // 6 tokens/ms
  assert.equal(r.rate(0, 12), 12, 'one sample against the prior in eight slots: a cold first request does not set the rate');
  for (let i = 0; i < 3; i++) r.observe(0, 900, 100, 12); // 9
  assert.equal(r.rate(0, 12), 12, 'median of 6, 9, 9, 9 and five of the prior');
  r.observe(0, 900, 100, 12);
  assert.equal(r.rate(0, 12), 9, 'the fifth sample of a slower replica carries the median: 6, 9, 9, 9, 9, 12 × 4');
  r.observe(0, 1e9, 1, 12);
  r.observe(0, 1e9, 1, 12);
  assert.equal(r.rate(0, 12), 9, 'two absurd samples (clamped to 18) do not move the median');
  r.observe(0, 0, 100, 12);
  r.observe(0, 100, -5, 12);
  assert.equal(r.samples(0), 7, 'empty or negative samples are ignored');
  r.reset(0);
  assert.equal(r.rate(0, 12), 12);
  assert.equal(r.rate(1, 2.4), 2.4);
});

void test('decode fit: converges to a perturbed engine from jittered samples with outliers; the prior holds what data cannot separate', () => {
  const fig = new PoolFigures(cfg.pools[0]!);
  const fit = new DecodeFit(2);
  const truth = { base: 10.5 * 1.2, perSeq: 0.025 * 0.8, perKv: 0.000085 * 1.15 };
  const rnd = prng(7);
  for (let i = 0; i < 600; i++) {
    const batch = 1 + Math.floor(rnd() * 200);
    const kv = rnd() * 300_000;
    let y = (truth.base + truth.perSeq * batch + truth.perKv * kv) * (0.9 + 0.2 * rnd());
    if (rnd() < 0.05) y *= 3; // a stream that sat behind a long prefill the model did not see
    fit.observe(0, fig, batch, kv, y);
  }
  const near = (got: number, want: number, share: number, what: string): void =>
    assert.ok(Math.abs(got - want) <= share * want, `${what}: ${got} against ${want}`);
  near(fit.baseMs(0, fig), truth.base, 0.05, 'base');
  near(fit.perSeqMs(0, fig), truth.perSeq, 0.15, 'per sequence');
  near(fit.perKvTokenMs(0, fig), truth.perKv, 0.15, 'per KV token');
  // Always the same batch and context: the step there is learned, the slopes stay near the prior.
  for (let i = 0; i < 300; i++) fit.observe(1, fig, 20, 40_000, 20 * (0.95 + 0.1 * rnd()));
  near(fit.stepMs(1, fig, 20, 40_000), 20, 0.03, 'the step where it was measured');
  near(fit.perSeqMs(1, fig), 0.025, 0.5, 'the per-sequence slope it could not measure');
  fit.reset(0);
  assert.equal(fit.stepMs(0, fig, 10, 0), fig.stepMs(10, 0));
});

void test('the model learns a perturbed replica from its first tokens and streams, and then predicts its TTFT', () => {
  const fleet = new FixtureFleet(['a']);
  fleet.rows[0]!.numGpuBlocks = 30_000;
  const model = new GpuTimeModel(fixtureConfig(['a']).pools, fleet, 5000);
  const fig = model.figures('8b')!;
  // The replica's engine: 20 % slower prefill, a heavier step; each step jittered ±10 %.
  const rate = 12 * 0.8;
  const trueStep = (b: number, kv: number): number => 10.5 * 1.2 + 0.025 * 0.9 * b + 0.000085 * 1.2 * kv;
  const rnd = prng(11);
  const jitter = (): number => 0.9 + 0.2 * rnd();
  const errors: number[] = [];
  for (let i = 0; i < 400; i++) {
    const batch = 1 + Math.floor(rnd() * 120);
    Object.assign(fleet.rows[0]!, { running: batch, kvUsage: rnd() * 0.8, lastGoodScrapeMs: fleet.now });
    const prompt = 500 + Math.floor(rnd() * 3500);
    const req = request(hashes(Math.floor(prompt / 16), i), { promptTokens: prompt });
    const d = dispatch(model, fleet, 0, prompt);
    const kv = fleet.rows[0]!.kvUsage * 30_000 * 16;
    // The engine: the prefill in chunks of 2,048 − batch, each step the decode part plus the chunk.
    let left = d.gpuWorkAhead;
    let ttft = 0;
    while (left > 0) {
      const c = Math.min(left, 2048 - batch);
      ttft += (trueStep(batch + 1, kv) + c / rate) * jitter();
      left -= c;
    }
    if (i >= 300) errors.push(Math.abs(d.gpuTtftMs - ttft) / ttft);
    fleet.now += ttft;
    fleet.ledger.firstToken({ slot: 0, promptTokens: prompt, wholePrompt: prompt, maxTokens: 100, expectTokens: 100, reserveTokens: 100, blocks: 0, blockSize: 16, outputTokens: 0, reply: null, sequences: 1, firstTokenSeen: false, ended: false });
    model.firstToken(0, req, d, ttft, true);
    const tokens = 50 + Math.floor(rnd() * 250);
    let streamMs = 0;
    for (let k = 1; k < tokens; k++) streamMs += trueStep(batch, kv) * jitter();
    fleet.now += streamMs;
    fleet.rows[0]!.lastGoodScrapeMs = fleet.now;
    fleet.ledger.resetSlot(0);
    model.ended(0, req, d, tokens);
  }
  const near = (got: number, want: number, share: number, what: string): void =>
    assert.ok(Math.abs(got - want) <= share * want, `${what}: ${got} against ${want}`);
  near(model.prefillTokensPerSecond(0, '8b'), rate * 1000, 0.05, 'prefill rate');
  const dec = model.decodeFigures(0, '8b')!;
  near(dec.baseMs, 10.5 * 1.2, 0.05, 'decode base');
  near(dec.perSeqMs, 0.025 * 0.9, 0.15, 'decode per sequence');
  near(model.decode.stepMs(0, fig, 60, 100_000), trueStep(60, 100_000), 0.03, 'a step at batch 60');
  errors.sort((a, b) => a - b);
  assert.ok(errors[errors.length >> 1]! < 0.05, `median TTFT error ${errors[errors.length >> 1]}`);
});

void test('its own prefill counts against TPOT only where a batch decodes: a long prompt fits an idle replica', () => {
  const fleet = new FixtureFleet(['a', 'b']);
  fleet.rows[0]!.numGpuBlocks = fleet.rows[1]!.numGpuBlocks = 30_000;
  fleet.rows[1]!.running = 3;
  const model = new GpuTimeModel(cfg.pools, fleet, 5000);
  const req = request(hashes(2500, 3), { promptTokens: 40_000 });
  const idle = model.predict(req, 0, 0, new GpuPrediction());
  const busy = model.predict(req, 1, 0, new GpuPrediction());
  // 40,000 tokens are ~5.8 s of prefill: over the window's 25 % cap, so ρ own is the cap on the busy replica.
  assert.equal(busy.rhoOwn, 0.25);
  assert.equal(idle.rho, 0);
  assert.ok(Math.abs(idle.tpotMs - step(1, 2500 * 16 + Math.ceil(100 / 16) * 16)) < 1e-9, String(idle.tpotMs));
  assert.ok(Math.abs(busy.tpotMs - busy.stepMs / 0.75) < 1e-9, String(busy.tpotMs));
  // Admission's TPOT limit is 0.6 × 50 ms: the idle replica passes, the one with a batch to stall does not.
  assert.ok(idle.tpotMs < 30 && busy.tpotMs > 16, `${idle.tpotMs} / ${busy.tpotMs}`);
});

void test('decode samples subtract the prefill under way: streams inside a 100k-token prefill do not teach a slow step', () => {
  const fleet = new FixtureFleet(['a']);
  fleet.rows[0]!.numGpuBlocks = 30_000;
  const model = new GpuTimeModel(fixtureConfig(['a']).pools, fleet, 5000);
  const fig = model.figures('8b')!;
  for (let i = 0; i < 40; i++) {
    Object.assign(fleet.rows[0]!, { running: 0, kvUsage: 0, lastGoodScrapeMs: fleet.now });
    // A short stream starts, then a 100k-token prompt arrives behind it.
    const short = request(hashes(31, 7000 + i), { promptTokens: 500 });
    const s = send(model, fleet, short);
    const shortTtft = step(1, 0) + work(0, 500) / 12;
    fleet.now += shortTtft;
    fleet.ledger.firstToken(s.e);
    model.firstToken(0, short, s.d, shortTtft, true);
    Object.assign(fleet.rows[0]!, { running: 1, lastGoodScrapeMs: fleet.now });
    const long = request(hashes(6250, 9000 + i), { promptTokens: 100_000 });
    const l = send(model, fleet, long);
    // Every step of the short stream now carries a 2,047-token chunk of the long prompt (~170 ms each); its
    // 100 tokens end long before the long prompt's first token (~24 s of prefill).
    const during = 99 * (step(2, 0) + 2047 / 12);
    fleet.now += during;
    fleet.ledger.tokens(s.e, 100);
    fleet.ledger.end(s.e);
    model.ended(0, short, s.d, 100);
    // The rest of the long prompt alone: full 2,048-token chunks at batch 1.
    const rest = work(0, 100_000) - 99 * 2047;
    const after = Math.ceil(rest / 2048) * step(1, 0) + rest / 12;
    fleet.now += after;
    const longTtft = during + after;
    fleet.ledger.firstToken(l.e);
    model.firstToken(0, long, l.d, longTtft, true);
    fleet.ledger.end(l.e);
    model.ended(0, long, l.d, 1);
    fleet.now += 1000;
  }
  // Counting only prefills whose first token came back, each sample would be ~180 ms.
  const learned = model.decode.stepMs(0, fig, 1.5, 0);
  assert.ok(Math.abs(learned - step(1.5, 0)) < 0.25 * step(1.5, 0), `learned step ${learned} against ${step(1.5, 0)}`);
});

void test('the step in progress: what is left of it since the replica\'s last token while only decode runs there', () => {
  const fleet = new FixtureFleet(['a']);
  const model = new GpuTimeModel(fixtureConfig(['a']).pools, fleet, 5000);
  // One sequence decoding there (past its first token), no prefill queued, nothing arriving: ρ is 0.
  fleet.ledger.firstToken(fleet.ledger.dispatch(0, 160, 100, 16));
  const req = request(hashes(10, 7), { promptTokens: 160 });
  const predict = (): GpuPrediction => model.predict(req, 0, 0, new GpuPrediction());
  const s = predict().stepsMs; // its own prefill fits one step at batch 2
  assert.ok(Math.abs(s - step(2, Math.ceil(260 / 16) * 16)) < 1e-9, String(s));
  assert.equal(predict().residualMs, 0.5 * s, 'no token seen yet: half a step, the mean at a random instant');
  model.tokens(0);
  assert.equal(predict().residualMs, s, 'a token just came back: the next step has begun without it, a whole step');
  fleet.now += 0.75 * s;
  assert.ok(Math.abs(predict().residualMs - 0.25 * s) < 1e-9, 'three quarters of the step gone: a quarter left');
  assert.ok(Math.abs(predict().ttftMs - (work(0, 160) / 12 + s + 0.25 * s)) < 1e-9, 'the residual is part of the TTFT');
  fleet.now += 0.5 * s;
  assert.equal(predict().residualMs, 0.5 * s, 'more than a step since the last token: a step running long, half a step assumed');
  model.tokens(0);
  fleet.rows[0]!.running = 3;
  fleet.rows[0]!.lastGoodScrapeMs = fleet.now;
  const seen = predict();
  assert.equal(seen.residualMs, 0.5 * seen.stepsMs, 'the scrape shows sequences no one here sent (another gateway\'s, maybe prefilling): half a step');
  fleet.rows[0]!.running = 1;
  assert.equal(predict().residualMs, s, 'the scrape shows only ours: the step is known again');
  model.replicaReset(0);
  assert.equal(predict().residualMs, 0.5 * s, 'a restarted replica\'s last token says nothing');
});

void test('the step in progress: with prefill queued its length is unknown: half a mean step, but at least the decode step left since the last token', () => {
  const fleet = new FixtureFleet(['a']);
  const model = new GpuTimeModel(fixtureConfig(['a']).pools, fleet, 5000);
  fleet.ledger.firstToken(fleet.ledger.dispatch(0, 160, 100, 16));
  dispatch(model, fleet, 0, 2000);
  const req = request(hashes(10, 7), { promptTokens: 160 });
  const before = model.predict(req, 0, 0, new GpuPrediction());
  assert.ok(before.workAhead > work(0, 160), 'the 2,000-token prompt is ahead');
  const step1 = before.stepsMs / Math.ceil(before.workAhead / (2048 - 1));
  assert.ok(Math.abs(before.residualMs - 0.5 * step1 / (1 - before.rhoArriving)) < 1e-9, 'no token seen: half a mean step');
  model.tokens(0);
  const after = model.predict(req, 0, 0, new GpuPrediction());
  assert.ok(after.rhoArriving < 0.5);
  assert.ok(Math.abs(after.residualMs - step1) < 1e-9, `a token just came back: a step has just begun, at least a whole decode step left; got ${after.residualMs}`);
  fleet.now += 0.3 * step1;
  const mid = model.predict(req, 0, 0, new GpuPrediction());
  assert.ok(Math.abs(mid.residualMs - 0.7 * step1) < 1e-9, `0.3 of a step since: 0.7 of one left; got ${mid.residualMs}`);
  fleet.now += 0.4 * step1;
  const later = model.predict(req, 0, 0, new GpuPrediction());
  assert.ok(Math.abs(later.residualMs - 0.5 * step1 / (1 - later.rhoArriving)) < 1e-9, `less than half a mean step left of the decode step: half a mean step, got ${later.residualMs}`);
  // The scrape shows the replica running mostly others' requests (another gateway's): the decode step learned
  // here carries their prefill too, so no floor from it, half a mean step even just after a token.
  model.tokens(0);
  fleet.rows[0]!.running = 8;
  fleet.rows[0]!.lastGoodScrapeMs = fleet.now;
  const crowded = model.predict(req, 0, 0, new GpuPrediction());
  const crowdedStep = crowded.stepsMs / Math.ceil(crowded.workAhead / (2048 - 8));
  assert.ok(Math.abs(crowded.residualMs - 0.5 * crowdedStep / (1 - crowded.rhoArriving)) < 1e-9, `others' requests there: half a mean step, got ${crowded.residualMs}`);
  // Ours again (the scrape shows two: the stream and the 2,000-token prompt): the floor is back.
  fleet.rows[0]!.running = 2;
  const own = model.predict(req, 0, 0, new GpuPrediction());
  const ownStep = own.stepsMs / Math.ceil(own.workAhead / (2048 - 2));
  assert.ok(Math.abs(own.residualMs - ownStep) < 1e-9, `only ours there: a whole decode step left just after a token, got ${own.residualMs}`);
});

void test('decode samples subtract other gateways\' prefill, which only the replica\'s prefix-cache counters show', () => {
  // Our short streams on replica a, while another gateway's prompts (8,000 uncached tokens per stream of ours)
  // ride in their steps. Our ledger and fluid know none of it; the scrape's prefix-cache queries less hits do.
  const learn = (counters: boolean): number => {
    const fleet = new FixtureFleet(['a']);
    fleet.rows[0]!.numGpuBlocks = 30_000;
    const model = new GpuTimeModel(fixtureConfig(['a']).pools, fleet, 5000);
    const foreign = 8000;
    let queries = 1;
    let hits = 0;
    const scrape = (running: number): void => {
      Object.assign(fleet.rows[0]!, { running, kvUsage: 0, lastGoodScrapeMs: fleet.now, ...(counters ? { prefixQueriesTotal: queries, prefixHitsTotal: hits } : {}) });
    };
    for (let i = 0; i < 40; i++) {
      scrape(0);
      const short = request(hashes(31, 7000 + i), { promptTokens: 500 });
      const { d, e } = send(model, fleet, short);
      const ttft = step(1, 0) + work(0, 500) / 12;
      fleet.now += ttft;
      queries += 500;
      scrape(1);
      fleet.ledger.firstToken(e);
      model.firstToken(0, short, d, ttft, true);
      // 99 gaps at batch 1-2, and the other gateway's 8,000 tokens (plus 24,000 it found cached) in them.
      fleet.now += 99 * step(1.5, 0) + work(0, foreign) / 12;
      queries += foreign + 24_000;
      hits += 24_000;
      scrape(2);
      fleet.ledger.tokens(e, 100);
      fleet.ledger.end(e);
      model.ended(0, short, d, 100);
      fleet.now += 1000;
    }
    return model.decode.stepMs(0, model.figures('8b')!, 1.5, 0);
  };
  const truth = step(1.5, 0);
  const withCounters = learn(true);
  assert.ok(Math.abs(withCounters - truth) < 0.1 * truth, `learned step ${withCounters} against ${truth}`);
  // Without the counters the other gateway's prefill reads as a slower step: ~6.8 ms more per gap.
  const without = learn(false);
  assert.ok(without > 1.4 * truth, `without the counters: ${without} against ${truth}`);
});

void test('other gateways\' prefill arriving at a replica, read from its scraped counters, raises the predicted TPOT there', () => {
  const fleet = new FixtureFleet(['a']);
  const model = new GpuTimeModel(fixtureConfig(['a']).pools, fleet, 5000);
  const req = request(hashes(31, 1), { promptTokens: 500 });
  const row = fleet.rows[0]!;
  Object.assign(row, { running: 20, lastGoodScrapeMs: fleet.now, prefixQueriesTotal: 100_000, prefixHitsTotal: 60_000 });
  const before = model.predict(req, 0, 0, new GpuPrediction());
  assert.equal(before.rhoArriving, 0, 'nothing of ours sent there');
  // One second later the replica has scheduled 30,000 more tokens, 20,000 of them uncached: not ours.
  fleet.now += 1000;
  Object.assign(row, { lastGoodScrapeMs: fleet.now, prefixQueriesTotal: 130_000, prefixHitsTotal: 70_000 });
  const after = model.predict(req, 0, 0, new GpuPrediction());
  // The fixture's 8B figures: 12 equivalent tokens per ms, 8 s window.
  assert.ok(Math.abs(after.rhoArriving - 20_000 / (12 * ARRIVAL_WINDOW_MS)) < 1e-9, `ρ ${after.rhoArriving}`);
  assert.ok(after.tpotMs > before.tpotMs * 1.2, `TPOT ${before.tpotMs} → ${after.tpotMs}`);
});
