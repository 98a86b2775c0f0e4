// KvEstimator: scraped KV use corrected by the ledger's dispatches since that scrape that are still in flight, never below the
// ledger's reservations, stale and missing rows flagged, reset after a restart.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { KvEstimator, KvState } from '../../../src/router/kv-estimate.ts';
import { InflightLedger } from '../../../src/registry/inflight-ledger.ts';
import type { ReplicaRow } from '../../../src/registry/replica-table.ts';
import type { FleetView } from '../../../src/router/types.ts';

class RowFleet implements FleetView {
  readonly ledger = new InflightLedger(4);
  readonly rows: Array<Partial<ReplicaRow> | null> = [null, null, null, null];
  now = 10_000;
  candidates(): readonly number[] { return [0, 1, 2, 3]; }
  isHealthy(): boolean { return true; }
  replica(slot: number): { id: string; draining: boolean; adapters: null } { return { id: `r${slot}`, draining: false, adapters: null }; }
  residentAdapters(): readonly string[] { return []; }
  readRow(slot: number, out: ReplicaRow): boolean {
    const r = this.rows[slot];
    if (r === null || r === undefined) return false;
    out.clearData();
    Object.assign(out, r);
    return true;
  }
  prefixAffinityOff(): boolean { return false; }
  nowMs(): number { return this.now; }
}

const scraped = (over: Partial<ReplicaRow>): Partial<ReplicaRow> => ({
  lastGoodScrapeMs: 9_950, kvUsage: 0.25, numGpuBlocks: 1000, blockSize: 16, running: 3, waiting: 1, ...over,
});

void test('a fresh row reports the scraped usage, its queues, its prefill tokens, our requests there as it was taken, and its age', () => {
  const fleet = new RowFleet();
  fleet.rows[0] = scraped({ prefixQueriesTotal: 50_000, prefixHitsTotal: 35_000, inflightAtScrape: 2 });
  const kv = new KvEstimator(fleet, 4, 5000);
  const s = new KvState();
  assert.equal(kv.read(0, s), true);
  assert.deepEqual({ ...s }, { fresh: true, totalBlocks: 1000, blockSize: 16, usedBlocks: 250, running: 3, waiting: 1, inflight: 0, inflightAtScrape: 2, ageMs: 50, prefillTokensTotal: 15_000, scrapeMs: 9_950 });
  // A replica that reports no prefix-cache counters: its prefill is unknown, not zero.
  fleet.rows[1] = scraped({});
  kv.read(1, s);
  assert.ok(Number.isNaN(s.prefillTokensTotal));
});

void test('blocks dispatched after the first look at a scrape are added while their requests run, until the next scrape', () => {
  const fleet = new RowFleet();
  fleet.rows[1] = scraped({});
  const kv = new KvEstimator(fleet, 4, 5000);
  const s = new KvState();
  kv.read(1, s);
  const e = fleet.ledger.dispatch(1, 1600, 0, 16); // 100 blocks
  kv.read(1, s);
  assert.equal(s.usedBlocks, 350, '250 scraped + 100 dispatched since');
  const f = fleet.ledger.dispatch(1, 800, 0, 16); // 50 blocks
  fleet.ledger.end(e);
  kv.read(1, s);
  assert.equal(s.usedBlocks, 300, 'a request that finished since the scrape is free again; the one still running is not');
  fleet.ledger.end(f);
  kv.read(1, s);
  assert.equal(s.usedBlocks, 250, 'nothing of ours in flight: the scrape alone');
  fleet.rows[1] = scraped({ lastGoodScrapeMs: 10_050, kvUsage: 0.3 });
  fleet.now = 10_100;
  kv.read(1, s);
  assert.equal(s.usedBlocks, 300, 'a new scrape replaces the correction');
});

void test('the estimate never falls below what the gateway has reserved there', () => {
  const fleet = new RowFleet();
  fleet.rows[2] = scraped({ kvUsage: 0 });
  const kv = new KvEstimator(fleet, 4, 5000);
  fleet.ledger.dispatch(2, 3200, 800, 16); // 250 blocks reserved before the first look
  const s = new KvState();
  kv.read(2, s);
  assert.equal(s.usedBlocks, 250);
  assert.equal(s.inflight, 1);
});

void test('rows older than stale_ms, never scraped or unreadable are not fresh; unreadable ones keep only the ledger', () => {
  const fleet = new RowFleet();
  fleet.rows[0] = scraped({ lastGoodScrapeMs: 4_000 });
  fleet.rows[1] = scraped({ lastGoodScrapeMs: 0 });
  fleet.ledger.dispatch(3, 160, 0, 16);
  const kv = new KvEstimator(fleet, 4, 5000);
  const s = new KvState();
  assert.equal(kv.read(0, s), false);
  assert.equal(s.ageMs, 6000);
  assert.equal(s.usedBlocks, 250, 'a stale row still reports its figures; the caller decides');
  assert.equal(kv.read(1, s), false);
  assert.equal(s.ageMs, Number.POSITIVE_INFINITY);
  assert.equal(kv.read(3, s), false);
  assert.ok(Number.isNaN(s.totalBlocks));
  assert.equal(s.usedBlocks, 10);
});

void test('reset forgets the snapshot so dispatches before it count as inside the next scrape', () => {
  const fleet = new RowFleet();
  fleet.rows[0] = scraped({ kvUsage: 0 });
  const kv = new KvEstimator(fleet, 4, 5000);
  const s = new KvState();
  kv.read(0, s);
  fleet.ledger.dispatch(0, 1600, 0, 16);
  kv.read(0, s);
  assert.equal(s.usedBlocks, 100);
  kv.reset(0);
  fleet.ledger.resetSlot(0);
  kv.read(0, s);
  assert.equal(s.usedBlocks, 0);
});
