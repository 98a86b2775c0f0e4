// A step's verdict against the design's SLA, and the sweep's last rate that held.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DESIGN_SLA, lastHeldRate, scaledSla, summarizeStep } from '../../../native-bench/load/sla.ts';
import type { RequestRecord } from '../../../native-bench/load/open-loop.ts';

function rec(o: Partial<RequestRecord>): RequestRecord {
  return {
    atMs: 0, tag: '1800', sendLagMs: 0, status: 200, retryAfter: null, errorCode: null, error: null, headersMs: 1,
    ttfbMs: 1, ttftMs: 100, tpotMs: 20, totalMs: 6000, promptTokens: 1800, completionTokens: 300, cachedTokens: 0, ...o,
  };
}

test('a step within every target holds', () => {
  const s = summarizeStep(Array.from({ length: 200 }, (_, i) => rec({ ttftMs: 50 + i })), scaledSla(1), 0.01);
  assert.equal(s.held, true);
  assert.deepEqual(s.missed, []);
  assert.equal(s.ttft.p50, 149);
  assert.equal(s.meanPromptTokens, 1800);
});

test('a TTFT p99 over 400 ms breaks it; prompts over 4,000 tokens are reported apart and do not count', () => {
  const recs = Array.from({ length: 100 }, (_, i) => rec({ ttftMs: i < 98 ? 100 : 450 }));
  const broke = summarizeStep(recs, scaledSla(1), 0.01);
  assert.equal(broke.held, false);
  assert.match(broke.missed.join(), /ttft p99 450\.0 > 400\.0/);
  const longSlow = recs.map((r, i) => (i < 98 ? r : { ...r, promptTokens: 20_000 }));
  const s = summarizeStep(longSlow, scaledSla(1), 0.01);
  assert.equal(s.held, true);
  assert.equal(s.ttftLong.count, 2);
  assert.equal(s.ttftLong.max, 450);
});

test('TPOT p95 and the error budget are targets too; time scale shrinks the latency targets', () => {
  const slowTokens = Array.from({ length: 100 }, (_, i) => rec({ tpotMs: i < 90 ? 20 : 60 }));
  assert.match(summarizeStep(slowTokens, scaledSla(1), 0.01).missed.join(), /tpot p95/);
  const errors = Array.from({ length: 100 }, (_, i) => rec(i < 3 ? { status: 429, error: null } : {}));
  const s = summarizeStep(errors, scaledSla(1), 0.01);
  assert.deepEqual(s.missed, ['errors 3/100']);
  assert.equal(s.statusCounts['429'], 3);
  const streamCut = [rec({}), rec({ error: 'stream ended without data: [DONE]' })];
  assert.equal(summarizeStep(streamCut, scaledSla(1), 0.01).failed, 1);
  const tenth = scaledSla(0.1);
  assert.equal(tenth.ttftP99Ms, DESIGN_SLA.ttftP99Ms / 10);
  assert.equal(summarizeStep([rec({ ttftMs: 50 })], tenth, 0.01).held, false);
});

test('the last held rate stops at the first rate that broke', () => {
  assert.equal(lastHeldRate([{ rate: 10, held: true }, { rate: 20, held: true }, { rate: 40, held: false }, { rate: 80, held: true }]), 20);
  assert.ok(Number.isNaN(lastHeldRate([{ rate: 10, held: false }])));
  assert.equal(lastHeldRate([{ rate: 5, held: true }]), 5);
});
