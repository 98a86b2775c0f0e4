// The soak's verdict: RSS growth is judged from the end of warm-up, which waits for the tokenizer caches to
// level off, so a cache growing to its bound passes and growth past it fails.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { summarizeSoak, warmupEnd, type Interval } from '../../../native-bench/soak/summary.ts';
import type { GatewaySample } from '../../../native-bench/soak/sampler.ts';

const MB = 2 ** 20;
const BOUND = 16 * MB;

function run(rssMb: (min: number) => number, cacheMb: (min: number) => number): Interval[] {
  const out: Interval[] = [];
  for (let min = 1; min <= 30; min++) {
    const sample: GatewaySample = { rssBytes: rssMb(min) * MB, rssAnonBytes: rssMb(min) * MB, threadsHeapBytes: 40 * MB, threadsHeapCommittedBytes: 48 * MB, threadsExternalBytes: 8 * MB, heapUsedBytes: 20 * MB, loopP99Ms: 1, loopMaxMs: 5, inflight: 0, tokenizerCacheBytes: cacheMb(min) * MB };
    out.push({ tS: min * 60, sent: 360, ok: 360, cut: 0, httpErrors: 0, broken: 0, statuses: {}, sample });
  }
  return out;
}
const final: GatewaySample = { rssBytes: 0, rssAnonBytes: 0, threadsHeapBytes: 0, threadsHeapCommittedBytes: 0, threadsExternalBytes: 0, heapUsedBytes: 0, loopP99Ms: 0, loopMaxMs: 0, inflight: 0, tokenizerCacheBytes: 0 };
// The cache fills 1 MiB a minute until minute 16 and RSS follows it, then both stay flat.
const cacheFill = (min: number): number => Math.min(16, min);

test('warm-up lasts until the tokenizer caches level off when that comes after the time-based warm-up', () => {
  const { warmS, cacheSettledS } = warmupEnd(run((m) => 200 + cacheFill(m), cacheFill), 300, BOUND);
  assert.equal(cacheSettledS, 16 * 60); // full at minute 16, flat after
  assert.equal(warmS, 16 * 60);
  assert.equal(warmupEnd(run((m) => 200 + cacheFill(m), cacheFill), 20 * 60, BOUND).warmS, 20 * 60);
  // Levelled off below the bound (one of two encoders used): settled all the same.
  const half = (m: number): number => Math.min(8, m);
  assert.equal(warmupEnd(run(() => 200, half), 300, BOUND).cacheSettledS, 8 * 60);
});

test('a cache filling to its bound passes; the same filling judged from minute 5 fails; growth after it fails', () => {
  const filling = run((m) => 200 + 2 * cacheFill(m), cacheFill);
  const { warmS } = warmupEnd(filling, 300, BOUND);
  assert.equal(summarizeSoak(filling, warmS, final, []).failed, undefined);
  assert.match(summarizeSoak(filling, 300, final, []).failed ?? '', /RSS grew/);
  const leaking = run((m) => 200 + 2 * cacheFill(m) + 2 * m, cacheFill);
  assert.match(summarizeSoak(leaking, warmupEnd(leaking, 300, BOUND).warmS, final, []).failed ?? '', /RSS grew/);
});

test('caches still growing in the last third leave the time-based warm-up in force', () => {
  const { warmS, cacheSettledS } = warmupEnd(run(() => 200, (m) => m / 2), 300, BOUND);
  assert.equal(cacheSettledS, null);
  assert.equal(warmS, 300);
  assert.equal(warmupEnd(run(() => 200, () => 1), 300, BOUND).warmS, 300, 'flat from the start: the time-based warm-up');
});

test('heap cycles without a trend pass; the same cycles on a slow climb fail', () => {
  // 10 s samples for 30 minutes: V8 growing and giving back 35 MB of heap pages, two samples in eight low.
  const sampled = (rssMb: (i: number) => number): Interval[] => Array.from({ length: 180 }, (_, i) => ({
    tS: (i + 1) * 10, sent: 60, ok: 60, cut: 0, httpErrors: 0, broken: 0, statuses: {},
    sample: { ...final, rssBytes: rssMb(i) * MB, tokenizerCacheBytes: BOUND },
  }));
  const cycle = (i: number): number => (i % 8 >= 6 ? 320 : 355);
  // Warm-up ends (minute 5, sample 29) just before two low samples and the run ends on high ones: the mean of
  // three samples at each end saw +7 % here; the two-minute medians see none.
  assert.equal(summarizeSoak(sampled(cycle), 300, final, []).failed, undefined);
  assert.match(summarizeSoak(sampled((i) => cycle(i) + i * 0.15), 300, final, []).failed ?? '', /RSS grew/);
});
