// What each replica's KV cache holds right now, as well as the gateway can tell: the last scrape's usage,
// corrected by the blocks this gateway has dispatched there since, and never below what the gateway's own
// in-flight requests have reserved. Scrapes lag by up to one interval; without the correction a burst
// arriving between two scrapes would see the same free space N times over (the thundering herd every
// scrape-driven router hits). The correction counts only dispatches still in flight: what was dispatched since
// the scrape and has finished is free again (vLLM counts a finished request's blocks as free, cached or not),
// and what is still in flight is inside the ledger's reservations, so the correction is at most those. Without
// that bound, requests that come and go faster than one scrape interval pile up as phantom use: a replica with
// nothing of ours in flight looked full and admission refused it. Requests that finished after the scrape
// stay inside its figures until the next one: that part errs fuller, for at most one interval.
// Rows older than stale_ms are not trusted at all: `fresh` is false and the caller treats the load as unknown.
// Shared by the KV-aware policy (to avoid replicas past their headroom) and admission control (the pool's
// budget), so both see one number. Thread: the acceptor; per-thread state (the ledger snapshot at each scrape).
// Hot path: one seqlock row copy and three Atomics.load per replica per call; no allocation.
import { LEDGER_DISPATCHED_BLOCKS, LEDGER_INFLIGHT, LEDGER_RESERVED_BLOCKS } from '../registry/inflight-ledger.ts';
import { ReplicaRow } from '../registry/replica-table.ts';
import type { FleetView } from './types.ts';

/** One replica's KV picture, filled by KvEstimator.read into a caller-owned object. */
export class KvState {
  /** A row of this member was read and is younger than stale_ms. */
  fresh = false;
  /** num_gpu_blocks from the replica's cache_config_info; NaN when not known. */
  totalBlocks = Number.NaN;
  blockSize = 16;
  /** Estimated blocks in use now (scrape + dispatched since, at least the ledger's reservations). */
  usedBlocks = 0;
  /** Scraped queue lengths (NaN-free: 0 when unknown). */
  running = 0;
  waiting = 0;
  /** Requests this gateway has in flight there (connections held). */
  inflight = 0;
  /** This gateway's requests in flight there when the row's scrape was sent (0 when unknown). */
  inflightAtScrape = 0;
  /**
   * Prompt tokens the replica has scheduled for prefill, every gateway's, cumulative: its prefix-cache
   * queries less hits (vLLM counts both in tokens when it schedules a new request). NaN when not reported.
   */
  prefillTokensTotal = Number.NaN;
  /** When the row's scrape was taken (the fleet clock's ms; 0 when never). */
  scrapeMs = 0;
  /** Age of the row, ms (Infinity when never scraped). */
  ageMs = Number.POSITIVE_INFINITY;
}

export class KvEstimator {
  private readonly fleet: FleetView;
  private readonly staleMs: number;
  private readonly row = new ReplicaRow();
  /** Per slot: the scrape stamp last seen, and the ledger's cumulative dispatched blocks at that moment. */
  private readonly seenStamp: Float64Array;
  private readonly dispatchedAtStamp: Int32Array;

  constructor(fleet: FleetView, slots: number, staleMs: number) {
    this.fleet = fleet;
    this.staleMs = staleMs;
    this.seenStamp = new Float64Array(slots);
    this.dispatchedAtStamp = new Int32Array(slots);
  }

  /** Fills `out` for `slot`. Returns out.fresh. */
  read(slot: number, out: KvState): boolean {
    const fleet = this.fleet;
    const ledger = fleet.ledger;
    const row = this.row;
    const reserved = ledger.get(slot, LEDGER_RESERVED_BLOCKS);
    out.inflight = ledger.get(slot, LEDGER_INFLIGHT);
    if (!fleet.readRow(slot, row) || row.lastGoodScrapeMs === 0) {
      out.fresh = false;
      out.totalBlocks = Number.NaN;
      out.usedBlocks = reserved;
      out.running = 0;
      out.waiting = 0;
      out.inflightAtScrape = 0;
      out.prefillTokensTotal = Number.NaN;
      out.scrapeMs = 0;
      out.ageMs = Number.POSITIVE_INFINITY;
      return false;
    }
    const dispatched = ledger.get(slot, LEDGER_DISPATCHED_BLOCKS);
    if (row.lastGoodScrapeMs !== this.seenStamp[slot]) {
      // First look at this scrape: what was dispatched before now is (mostly) inside its figures. Dispatches
      // between the scrape and this first look are counted twice, which errs towards fuller.
      this.seenStamp[slot] = row.lastGoodScrapeMs;
      this.dispatchedAtStamp[slot] = dispatched;
    }
    const since = (dispatched - this.dispatchedAtStamp[slot]!) | 0;
    out.scrapeMs = row.lastGoodScrapeMs;
    out.ageMs = fleet.nowMs() - row.lastGoodScrapeMs;
    out.fresh = out.ageMs <= this.staleMs;
    out.totalBlocks = row.numGpuBlocks;
    out.blockSize = Number.isNaN(row.blockSize) ? 16 : row.blockSize;
    out.running = row.running;
    out.waiting = row.waiting;
    out.inflightAtScrape = row.inflightAtScrape;
    out.prefillTokensTotal = row.prefixQueriesTotal > 0 ? row.prefixQueriesTotal - row.prefixHitsTotal : Number.NaN;
    const scraped = Number.isNaN(row.kvUsage) || Number.isNaN(row.numGpuBlocks) ? 0 : row.kvUsage * row.numGpuBlocks;
    // Dispatched since the scrape and still running is at most what in-flight requests reserve.
    const stillIn = since < reserved ? since : reserved;
    const corrected = scraped + (stillIn > 0 ? stillIn : 0);
    out.usedBlocks = corrected > reserved ? corrected : reserved;
    return out.fresh;
  }

  /** Forget the snapshot for a slot whose replica restarted or was replaced. */
  reset(slot: number): void {
    this.seenStamp[slot] = 0;
    this.dispatchedAtStamp[slot] = 0;
  }
}
