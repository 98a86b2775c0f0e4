// The pieces kv-aware is built from, table by table: the GPU-time scorer, the headroom and load-bound
// filters, the tiered picker, the pool's nominal step model and the cached-token rule.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CandidateTable } from '../../../src/router/candidate-table.ts';
import { HeadroomFilter } from '../../../src/router/filters/headroom-filter.ts';
import { LoadBoundFilter } from '../../../src/router/filters/load-bound-filter.ts';
import { PrefixIndex } from '../../../src/router/prefix-index.ts';
import { TIER_FITS, TIER_FITS_PAST_BOUND, TIER_FULL, TIER_STALE, TieredPicker } from '../../../src/router/pickers/tiered-picker.ts';
import { GpuTimeScorer } from '../../../src/router/scorers/gpu-time-scorer.ts';
import { predictedCachedTokens } from '../../../src/router/cached-tokens.ts';
import { GpuTimeModel } from '../../../src/gpu-time/gpu-time-model.ts';
import { PoolFigures } from '../../../src/gpu-time/pool-figures.ts';
import { GpuFit } from '../../../src/admission/gpu-fit.ts';
import { Decision } from '../../../src/router/types.ts';
import { FixtureFleet, fixtureConfig, hashes, request } from './fleet-fixture.ts';

const cfg8b = fixtureConfig(['a']);
const pool8b = cfg8b.pools[0]!;
/** Equivalent prefill tokens of positions a..b with the 8B default attention coefficient. */
const work = (a: number, b: number): number => b - a + 1.872e-5 * (b * b - a * a);

void test('the step model reproduces the mock engine calibration for 8B and 70B', () => {
  const m8 = new PoolFigures(pool8b);
  const m70 = new PoolFigures({ id: '70b', block_size: 16, engine: { ...pool8b.engine, decode_base_ms: 48.5, decode_per_seq_ms: 0.06, decode_per_1k_kv_tokens_ms: 0.1 } });
  const cases: Array<[PoolFigures, number, number]> = [[m8, 1, 10.65], [m8, 64, 20.3], [m8, 256, 49.5], [m70, 1, 48.7], [m70, 128, 75.4]];
  for (const [m, batch, ms] of cases) assert.ok(Math.abs(m.stepMs(batch, batch * 1500) - ms) < 0.1, `${batch} → ${m.stepMs(batch, batch * 1500)}`);
});

void test('predicted TTFT: prefill ahead and own uncached work over the rate, riding in decode steps, adapter load', () => {
  // prompt 1,208 tokens (75 full blocks), max_tokens 100 → 82 blocks; 8B defaults: 12 tokens/ms, steps of
  // 10.5 + 0.025 × batch + 0.085 per 1k KV tokens, 2,048 tokens per step.
  const idle = work(0, 1208) / 12 + 10.525;
  const cases: Array<{ name: string; matched: number; setup?: (f: FixtureFleet) => void; adapter?: string; ttft: number; kvAfter: number }> = [
    { name: 'idle, nothing cached', matched: 0, ttft: idle, kvAfter: 82 / 10_000 },
    { name: '50 blocks cached', matched: 50, ttft: work(800, 1208) / 12 + 10.525, kvAfter: 32 / 10_000 },
    {
      // Ahead: 2,400 ledger tokens no first token has come back for, and 2 scraped waiting requests beyond
      // the ledger's (3 − 1) of the pool's mean prompt (the request's own until one is dispatched); batch 10
      // from the scrape, 1,000 blocks used: steps of 10.5 + 0.025 × 11 + 0.085 × 16 = 12.135 ms, each with
      // 2,038 prefill tokens: ceil(6,105.95 / 2,038) = 3 of them; half a step left of the one in progress.
      name: 'ledger prefill + scraped waiting beyond the ledger × mean prompt, batch from the scrape', matched: 0,
      setup: (f) => { f.ledger.dispatch(0, 2400, 0, 16); Object.assign(f.rows[0]!, { waiting: 3, running: 10, kvUsage: 0.1 }); },
      ttft: (2400 + 3 * work(0, 1208)) / 12 + 3.5 * 12.135, kvAfter: 1082 / 10_000,
    },
    { name: 'adapter not resident', matched: 0, adapter: 'sql', ttft: idle + 40, kvAfter: 82 / 10_000 },
    { name: 'adapter resident', matched: 0, adapter: 'sql', setup: (f) => { f.resident[0] = ['sql']; }, ttft: idle, kvAfter: 82 / 10_000 },
    {
      name: 'stale row: only the ledger counts, KV unknown', matched: 0,
      setup: (f) => { f.ledger.dispatch(0, 2400, 0, 16); Object.assign(f.rows[0]!, { waiting: 50, running: 200, kvUsage: 0.5, lastGoodScrapeMs: 1 }); },
      // KV from the ledger's reservation alone: 150 blocks = 2,400 tokens → step 10.729 ms; 2 steps and half
      // of the one in progress.
      ttft: (2400 + work(0, 1208)) / 12 + 2.5 * 10.729, kvAfter: Number.NaN,
    },
  ];
  for (const c of cases) {
    const fleet = new FixtureFleet(['a']);
    c.setup?.(fleet);
    const index = new PrefixIndex({ entries: 64, slots: 1 });
    const t = new CandidateTable(1);
    t.begin([0]);
    t.matched[0] = c.matched;
    const model = new GpuTimeModel(cfg8b.pools, fleet, 5000);
    const req = request(hashes(75, 1), { promptTokens: 1208, adapter: c.adapter ?? null });
    new GpuTimeScorer().score(req, t, fleet, model, index);
    assert.ok(Math.abs(t.ttftMs[0]! - c.ttft) < 1e-3, `${c.name}: ${t.ttftMs[0]} against ${c.ttft}`);
    if (Number.isNaN(c.kvAfter)) assert.ok(Number.isNaN(t.kvAfter[0]!), c.name);
    else assert.ok(Math.abs(t.kvAfter[0]! - c.kvAfter) < 1e-9, `${c.name}: kv ${t.kvAfter[0]}`);
    assert.equal(t.addTokens[0], 1208 - c.matched * 16 + 100, c.name);
    // The TTFT budget: the pool's 400 ms target (the prompt is under 4,000 tokens).
    assert.equal(model.budgetMs(req), 400, c.name);
  }
});

void test('TTFT budget: a prompt over 4,000 tokens may take 1.25 × its idle TTFT, more than the target', () => {
  const fleet = new FixtureFleet(['a']);
  const t = new CandidateTable(1);
  t.begin([0]);
  t.matched[0] = 0;
  const model = new GpuTimeModel(cfg8b.pools, fleet, 5000);
  const req = request(hashes(2000, 1), { promptTokens: 32_000 });
  new GpuTimeScorer().score(req, t, fleet, model, new PrefixIndex({ entries: 64, slots: 1 }));
  // 16 chunks of 2,048 (the last 1,280): each a step at batch 1 reading the context before it, plus its work.
  let idle = 0;
  for (let a = 0; a < 32_000; a += 2048) idle += 10.525 + 0.085 * a / 1000 + work(a, Math.min(32_000, a + 2048)) / 12;
  const budget = model.budgetMs(req);
  assert.ok(Math.abs(budget - 1.25 * idle) < 1e-6, `${budget} against ${1.25 * idle}`);
  assert.ok(t.ttftMs[0]! <= budget, 'an idle replica meets a long prompt\'s budget');
  assert.equal(t.gpuFits[0], 1, 'so admission\'s rule passes it there');
});

void test('the scorer\'s fit verdict is admission\'s own: a replica holding only our queued prefill takes a request whose worst case fits its budget', () => {
  const fleet = new FixtureFleet(['a']);
  const model = new GpuTimeModel(cfg8b.pools, fleet, 5000);
  // 2,400 tokens of ours await their first token there; nothing else runs: the model sees everything.
  const first = request(hashes(150, 7), { promptTokens: 2400 });
  const d = new Decision();
  d.slot = 0;
  fleet.ledger.dispatch(0, 2400, 0, 16);
  model.dispatched(0, first, d);
  const req = request(hashes(75, 1), { promptTokens: 1208 });
  const t = new CandidateTable(1);
  t.begin([0]);
  t.matched[0] = 0;
  new GpuTimeScorer(0.5, 0.6).score(req, t, fleet, model, new PrefixIndex({ entries: 64, slots: 1 }));
  // Past half its 400 ms budget (the margin) but its worst case within the budget: admission takes it, so does the router.
  assert.ok(t.ttftMs[0]! > 0.5 * 400 && t.ttftMs[0]! < 400, `${t.ttftMs[0]}`);
  const g = new GpuFit();
  assert.equal(g.judge(model, req, 0, 0, 400, 0, 0.5, 0.6), true);
  assert.equal(g.certain, true);
  assert.equal(t.gpuFits[0], 1);
  new HeadroomFilter(0.15, 4).mark(t);
  assert.equal(t.fits[0], 1);
});

void test('headroom filter: KV after the request, the connection cap, and admission\'s GPU-time verdict', () => {
  const f = new HeadroomFilter(0.15, 4);
  const rows: Array<[kvAfter: number, inflight: number, gpuFits: number, fits: number]> = [
    [0.5, 0, 1, 1], [0.85, 0, 1, 1], [0.86, 0, 1, 0], [Number.NaN, 0, 1, 1], [0.5, 3, 1, 1], [0.5, 4, 1, 0],
    // admission's rule refuses it (TTFT, TPOT or a harmed stream): does not fit, whatever the rest
    [0.5, 0, 0, 0], [Number.NaN, 0, 0, 0],
  ];
  const t = new CandidateTable(rows.length);
  t.begin(rows.map((_, i) => i));
  rows.forEach(([kv, inflight, gpu], i) => {
    t.kvAfter[i] = kv; t.inflight[i] = inflight; t.gpuFits[i] = gpu;
  });
  f.mark(t);
  assert.deepEqual([...t.fits.subarray(0, rows.length)], rows.map((r) => r[3]));
});

void test('load-bound filter: within (1 + ε) × the mean including the request, idle always allowed', () => {
  const cases: Array<{ out: number[]; add: number[]; allowed: number[]; within: number }> = [
    // mean with the request = (0 + 1500 + 3000 + 1000) / 3 = 1833; bound 2292: 1500 + 1000 is over
    { out: [0, 1500, 3000], add: [1000, 1000, 1000], allowed: [1, 0, 0], within: 1 },
    { out: [0, 1000, 3000], add: [1000, 1000, 1000], allowed: [1, 1, 0], within: 2 },
    { out: [500, 500, 500, 500], add: [100, 100, 100, 100], allowed: [1, 1, 1, 1], within: 4 },
    // a request bigger than any busy replica's bound: the rule applies to the load before it
    { out: [100, 200], add: [10_000, 10_000], allowed: [1, 1], within: 0 },
    { out: [5000, 5000, 60_000], add: [50_000, 50_000, 50_000], allowed: [1, 1, 0], within: 0 },
    // cached work is less: same replica allowed with a smaller addition
    { out: [1000, 1000], add: [100, 2000], allowed: [1, 0], within: 1 },
  ];
  const f = new LoadBoundFilter(0.25);
  for (const c of cases) {
    const t = new CandidateTable(c.out.length);
    t.begin(c.out.map((_, i) => i));
    c.out.forEach((o, i) => { t.outstanding[i] = o; t.addTokens[i] = c.add[i]!; });
    assert.equal(f.mark(t), c.within);
    assert.deepEqual([...t.allowed.subarray(0, c.out.length)], c.allowed, JSON.stringify(c));
  }
});

void test('tiered picker: fits, then fits past the load bound, then fresh but full, then stale; never past the bound unless it fits', () => {
  const cases: Array<{ allowed: number[]; fresh: number[]; fits: number[]; ttft: number[]; pick: number; tier: number }> = [
    { allowed: [1, 1, 1], fresh: [1, 1, 1], fits: [1, 1, 1], ttft: [30, 10, 20], pick: 1, tier: TIER_FITS },
    { allowed: [1, 0, 1], fresh: [1, 1, 1], fits: [1, 1, 1], ttft: [30, 10, 20], pick: 2, tier: TIER_FITS },
    { allowed: [1, 1, 1], fresh: [1, 1, 1], fits: [0, 1, 0], ttft: [10, 90, 20], pick: 1, tier: TIER_FITS },
    { allowed: [1, 1, 1], fresh: [1, 0, 1], fits: [0, 1, 0], ttft: [30, 5, 20], pick: 2, tier: TIER_FULL },
    { allowed: [1, 1], fresh: [0, 0], fits: [1, 1], ttft: [30, 20], pick: 1, tier: TIER_STALE },
    // None within the bound fits: the one past it that fits is taken rather than a miss within it.
    { allowed: [0, 1, 1], fresh: [1, 1, 1], fits: [1, 0, 0], ttft: [90, 10, 20], pick: 0, tier: TIER_FITS_PAST_BOUND },
    // Past the bound and not fitting: never.
    { allowed: [0, 1], fresh: [1, 1], fits: [0, 0], ttft: [5, 20], pick: 1, tier: TIER_FULL },
  ];
  for (const c of cases) {
    const t = new CandidateTable(3);
    t.begin(c.ttft.map((_, i) => i));
    c.ttft.forEach((v, i) => { t.ttftMs[i] = v; t.allowed[i] = c.allowed[i]!; t.fresh[i] = c.fresh[i]!; t.fits[i] = c.fits[i]!; });
    const p = new TieredPicker();
    assert.equal(p.pickLeastTtft(t), c.pick, JSON.stringify(c));
    assert.equal(p.tier, c.tier);
  }
  const t = new CandidateTable(3);
  t.begin([0, 1, 2]);
  [[1, 1, 1, 5, 10], [1, 1, 1, 9, 30], [1, 1, 0, 99, 1]].forEach(([al, fr, fi, w, ttft], i) => {
    t.allowed[i] = al!; t.fresh[i] = fr!; t.fits[i] = fi!; t.weight[i] = w!; t.ttftMs[i] = ttft!;
  });
  assert.equal(new TieredPicker().pickHighestWeight(t), 1, 'highest weight among those that fit');
  t.fits[0] = 0; t.fits[1] = 0;
  assert.equal(new TieredPicker().pickHighestWeight(t), 2, 'none fits: the least TTFT of the full ones');
  t.fits[0] = 1; t.allowed[0] = 0;
  const cold = new TieredPicker();
  assert.equal(cold.pickHighestWeight(t), 0, 'none within the bound fits: the one past it that fits');
  assert.equal(cold.tier, TIER_FITS_PAST_BOUND);
});

void test('tiered picker, full tier: the replica holding more of the prompt first, then the lower TTFT; a tier that fits still goes by TTFT', () => {
  const t = new CandidateTable(3);
  t.begin([0, 1, 2]);
  // Every candidate within the bound, fresh, and none fits: the holder of 40 blocks, though slower.
  [[0, 12], [40, 30], [40, 25]].forEach(([matched, ttft], i) => {
    t.allowed[i] = 1; t.fresh[i] = 1; t.fits[i] = 0; t.matched[i] = matched!; t.ttftMs[i] = ttft!;
  });
  const p = new TieredPicker();
  assert.equal(p.pickLeastTtft(t), 2, 'the most cached blocks, the lower TTFT of the two holders');
  assert.equal(p.tier, TIER_FULL);
  t.matched[1] = 41;
  assert.equal(p.pickLeastTtft(t), 1);
  // Where some fit, the least TTFT among them, whatever they hold.
  t.fits[0] = 1; t.fits[2] = 1;
  assert.equal(p.pickLeastTtft(t), 0);
  assert.equal(p.tier, TIER_FITS);
});

void test('the cached tokens a replica reports for a held prefix leave the last prompt token to compute', () => {
  const cases: Array<[blocks: number, prompt: number, tokens: number]> = [[10, 200, 160], [10, 160, 144], [0, 200, 0], [1, 16, 0], [3, 1000, 48]];
  for (const [b, p, want] of cases) assert.equal(predictedCachedTokens(b, p, 16), want, `${b} blocks of ${p}`);
});
