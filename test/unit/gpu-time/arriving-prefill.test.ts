// ArrivingPrefill: the prefill arriving at a replica (ρ's numerator), ours from our dispatches and other
// gateways' from the replica's scraped prefix-cache counters, folded once per new scrape.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ArrivingPrefill } from '../../../src/gpu-time/arriving-prefill.ts';
import { ARRIVAL_WINDOW_MS } from '../../../src/gpu-time/model-parameters.ts';
import { KvState } from '../../../src/router/kv-estimate.ts';

const scrape = (scrapeMs: number, prefillTokensTotal: number): KvState =>
  Object.assign(new KvState(), { fresh: true, scrapeMs, prefillTokensTotal });

void test('our own tokens, scheduled after the scrape that follows their dispatch, never read as another gateway\'s', () => {
  const a = new ArrivingPrefill(1);
  assert.equal(a.foreign(0, scrape(100, 5_000)), 0, 'the first scrape sets the baseline');
  a.dispatched(0, 150, 2_000, 2_000);
  assert.equal(a.foreign(0, scrape(200, 5_000)), 0, 'dispatched, not yet scheduled');
  assert.equal(a.foreign(0, scrape(300, 6_200)), 0, 'part of it scheduled');
  assert.equal(a.foreign(0, scrape(400, 7_000)), 0, 'all of it');
  assert.equal(a.foreign(0, scrape(400, 7_000)), 0);
  assert.equal(a.now(0, 400), 2_000 * Math.exp(-250 / ARRIVAL_WINDOW_MS), 'ours arrived at dispatch');
});

void test('another gateway\'s tokens count once, when a scrape shows them beyond ours', () => {
  const a = new ArrivingPrefill(1);
  a.foreign(0, scrape(100, 10_000));
  a.dispatched(0, 120, 1_000, 1_000);
  // Ours (1,000) not scheduled yet, theirs 3,000 already: the bound cannot tell them apart until ours is in.
  assert.equal(a.foreign(0, scrape(200, 13_000)), 2_000);
  assert.equal(a.foreign(0, scrape(300, 14_000)), 1_000, 'ours scheduled: the rest of theirs shows');
  assert.equal(a.foreign(0, scrape(400, 14_000)), 0, 'nothing new');
  assert.equal(a.foreign(0, scrape(500, 16_500)), 2_500);
});

void test('a request of ours that ended unscheduled does not hide later foreign tokens; a restart or no counters count nothing', () => {
  const a = new ArrivingPrefill(2);
  a.foreign(0, scrape(100, 0));
  a.dispatched(0, 110, 4_000, 4_000);
  a.unsent(0, 4_000);
  assert.equal(a.foreign(0, scrape(200, 500)), 500);
  assert.equal(a.foreign(0, scrape(300, 100)), 0, 'counters went back: a new baseline');
  assert.equal(a.foreign(0, scrape(400, 400)), 300);
  assert.equal(a.foreign(1, scrape(100, Number.NaN)), 0);
  assert.equal(a.foreign(1, scrape(200, Number.NaN)), 0, 'not reported');
  assert.equal(a.foreign(1, Object.assign(scrape(300, 900), { fresh: false })), 0, 'a stale row is not folded');
});
