// The reply-length model on streams of a known distribution: it starts at the pool's prior, converges to the
// distribution's quantiles and mean, follows a shift, reads max_tokens as a bound only, keeps tenants apart
// once each has its samples, and revises a running stream's length given what it has produced.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ReplyLengths } from '../../../src/gpu-time/reply-length/reply-lengths.ts';
import { ReplyForecast, exactForecast } from '../../../src/gpu-time/reply-length/reply-forecast.ts';
import { bucketOf, EDGES, BUCKETS } from '../../../src/gpu-time/reply-length/reply-histogram.ts';
import { MIN_CELL_WEIGHT, SLACK_QUANTILE } from '../../../src/gpu-time/reply-length/reply-table.ts';
import { fixtureConfig } from '../router/fleet-fixture.ts';

/** A seeded log-normal source (mulberry32 + Box-Muller). */
function lognormal(seed: number, median: number, sigma: number): () => number {
  let s = seed >>> 0;
  const u = (): number => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (((t ^ (t >>> 14)) >>> 0) + 0.5) / 4294967296;
  };
  return () => Math.max(1, Math.round(median * Math.exp(sigma * Math.sqrt(-2 * Math.log(u())) * Math.cos(2 * Math.PI * u()))));
}

const Z90 = 1.2815515655446004;

/** The standard normal's quantile: bisection on its CDF (erf by Abramowitz-Stegun 7.1.26, error < 2e-7). */
function zOf(p: number): number {
  const cdf = (z: number): number => {
    const x = Math.abs(z) / Math.SQRT2;
    const t = 1 / (1 + 0.3275911 * x);
    const erf = 1 - t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))) * Math.exp(-x * x);
    return z >= 0 ? (1 + erf) / 2 : (1 - erf) / 2;
  };
  let lo = -8;
  let hi = 8;
  for (let i = 0; i < 60; i++) {
    const mid = (lo + hi) / 2;
    if (cdf(mid) < p) lo = mid;
    else hi = mid;
  }
  return (lo + hi) / 2;
}

function lengths(): ReplyLengths {
  const cfg = fixtureConfig(['a', 'b']);
  return new ReplyLengths(cfg.pools);
}

function feed(m: ReplyLengths, draw: () => number, n: number, tenant: string | null = null, cap = 8192): void {
  for (let i = 0; i < n; i++) {
    const f = m.forecast('8b', 'chat', tenant, 1000, cap, true);
    m.finished(f, Math.min(draw(), cap));
  }
}

function near(actual: number, expected: number, within: number, what: string): void {
  assert.ok(Math.abs(actual - expected) <= within * expected, `${what}: ${actual.toFixed(1)} against ${expected.toFixed(1)} (±${within * 100} %)`);
}

test('the buckets cover every length once: exact to 16, a quarter octave above', () => {
  for (let t = 1; t < 300_000; t = t < 100 ? t + 1 : Math.ceil(t * 1.01)) {
    const b = bucketOf(t);
    assert.ok(b >= 0 && b < BUCKETS);
    assert.ok(EDGES[b]! <= t && (t < EDGES[b + 1]! || b === BUCKETS - 1), `length ${t} in bucket ${b}`);
  }
  assert.equal(bucketOf(5), 4);
  assert.equal(EDGES[BUCKETS - 1], 131_072);
});

test('before any stream finishes the forecast is the pool prior (typical_reply_tokens)', () => {
  const m = lengths();
  const f = m.forecast('8b', 'chat', null, 1000, 8192, true);
  near(f.medianTokens, 256, 0.05, 'median');
  assert.ok(f.kvTokens > f.medianTokens && f.kvTokens < 8192);
  assert.equal(f.level, 0);
});

test('it converges to a log-normal reply distribution: median, 90th percentile and mean', () => {
  const m = lengths();
  feed(m, lognormal(1, 300, 0.9), 3000);
  const f = m.forecast('8b', 'chat', null, 1000, 8192, true);
  assert.equal(f.level, 3, 'the finest cell has its samples');
  near(f.medianTokens, 300, 0.08, 'median');
  // A cell remembers ~200 streams: a quantile's sampling error is then ~8 % at σ 0.9.
  near(f.slackTokens, 300 * Math.exp(zOf(SLACK_QUANTILE) * 0.9), 0.15, 'the per-stream rule (SLACK_QUANTILE)');
  near(f.kvTokens, 300 * Math.exp(Z90 * 0.9), 0.12, 'KV (90th percentile)');
  near(f.meanTokens, 300 * Math.exp(0.9 * 0.9 / 2), 0.1, 'mean');
});

test('it tracks a shift: replies four times shorter are followed within three memories (~600 streams)', () => {
  const m = lengths();
  feed(m, lognormal(2, 400, 0.6), 2000);
  near(m.forecast('8b', 'chat', null, 1000, 8192, true).medianTokens, 400, 0.08, 'before');
  feed(m, lognormal(3, 100, 0.6), 200);
  const halfway = m.forecast('8b', 'chat', null, 1000, 8192, true).medianTokens;
  assert.ok(halfway > 110 && halfway < 250, `after one memory, on its way: ${halfway}`);
  feed(m, lognormal(3, 100, 0.6), 400);
  near(m.forecast('8b', 'chat', null, 1000, 8192, true).medianTokens, 100, 0.08, 'after 600 streams');
});

test('max_tokens bounds every figure and is never taken for a length', () => {
  const m = lengths();
  feed(m, lognormal(4, 300, 0.9), 2000);
  // A small cap: every figure at most the cap, the median where the distribution puts it.
  const f = m.forecast('8b', 'chat', null, 1000, 200, true);
  assert.ok(f.kvTokens <= 200 && f.meanTokens <= 200 && f.slackTokens <= 200);
  // A huge cap (or none sent) does not stretch the forecast.
  const g = m.forecast('8b', 'chat', null, 1000, 100_000, false);
  assert.ok(g.medianTokens < 400, `no cap sent: median ${g.medianTokens}`);
});

test('contexts are kept apart once each has its samples; a new one backs off to the coarser cell', () => {
  const m = lengths();
  feed(m, lognormal(5, 40, 0.5), 600, 'short-answers');
  const fresh = m.forecast('8b', 'chat', 'essays', 1000, 8192, true);
  assert.ok(fresh.level < 2, 'a tenant with no samples reads a coarser cell');
  near(fresh.medianTokens, 40, 0.15, 'backed off to the route and cap');
  feed(m, lognormal(6, 1500, 0.5), MIN_CELL_WEIGHT * 4, 'essays');
  near(m.forecast('8b', 'chat', 'essays', 1000, 8192, true).medianTokens, 1500, 0.2, 'essays');
  near(m.forecast('8b', 'chat', 'short-answers', 1000, 8192, true).medianTokens, 40, 0.15, 'short answers');
});

test('a stream past its forecast is revised from the distribution given what it has produced', () => {
  const m = lengths();
  feed(m, lognormal(7, 300, 0.9), 3000);
  const f = m.forecast('8b', 'chat', null, 1000, 8192, true);
  // Given L > the median, its q-quantile is the unconditional (0.5 + q / 2)-quantile.
  near(f.slackAfter(300), 300 * Math.exp(zOf(0.5 + SLACK_QUANTILE / 2) * 0.9), 0.1, 'conditional quantile past 300');
  assert.ok(f.kvAfter(2000) > 2000 && f.meanAfter(2000) > 2000, 'beyond anything common: still longer than produced');
  assert.equal(f.kvAfter(9000), 8192, 'at the cap');
  const exact = exactForecast(77);
  assert.equal(exact.slackAfter(10), 77);
});

test('the error figures judge the median forecast against each finished stream', () => {
  const m = lengths();
  const f = new ReplyForecast();
  for (let i = 0; i < 300; i++) m.finished(m.forecast('8b', 'chat', null, 1000, 8192, true, f), 120);
  const [[pool, p50, p90]] = [...m.errorQuantiles()] as Array<[string, number, number]>;
  assert.equal(pool, '8b');
  assert.ok(p50 < 0.05 && p90 < 0.1, `a constant length is learnt: p50 ${p50}, p90 ${p90}`);
});
