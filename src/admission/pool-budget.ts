// The pool's KV picture for admission, from the KvEstimator every KV-aware decision shares (scrape corrected
// by this gateway's dispatches since, never below its own reservations), summed over the replicas that can
// take work now: healthy, not draining, with a row younger than admission.stale_ms that reports its KV size.
//   free     = Σ (totalBlocks − usedBlocks) × blockSize
//   headroom = headroom_ratio × Σ totalBlocks × blockSize      (kept free so the engines never preempt)
//   room     = free − headroom                                  (the caller also subtracts the queue ahead)
// A stale or unreadable row counts as unknown load, never as idle: its replica adds nothing to the budget.
// replicaRoom() is the same figure for one replica, for the check that the router's choice can hold the
// request. Also: the largest whole KV of any member (a request larger than it can never run), and a drain-rate
// fallback for a pool where nothing has completed yet: per replica, the larger of one token per running
// sequence per decode step (tpot_target_ms) and the tokens this gateway holds there over the time its
// outstanding work takes at one token per sequence per step.
// Thread: the acceptor. Hot path: one KvEstimator.read per member (a seqlocked row copy and a few Atomics).
import { LEDGER_INFLIGHT, LEDGER_OUTSTANDING_TOKENS, LEDGER_RESERVED_BLOCKS } from '../registry/inflight-ledger.ts';
import { KvState, type KvEstimator } from '../router/kv-estimate.ts';
import type { FleetView } from '../router/types.ts';

export class PoolBudget {
  /** Members that are healthy and not draining. */
  live = 0;
  /** Of those, members whose KV figures are fresh and known (they make up the budget). */
  counted = 0;
  /** Live members with a fresh row that reports no KV size (no cache_config_info): nothing to budget with. */
  sizeUnknown = 0;
  freeTokens = 0;
  headroomTokens = 0;
  /** Largest num_gpu_blocks × block_size among members with a known size; NaN when none is known. */
  wholeMaxTokens = Number.NaN;
  /** Fallback drain rate, tokens per second, over the counted members. */
  decodeDrainPerSecond = 0;

  /** KV tokens free beyond the headroom (may be negative). */
  get roomTokens(): number {
    return this.freeTokens - this.headroomTokens;
  }
}

export class PoolBudgetReader {
  private readonly fleet: FleetView;
  private readonly kv: KvEstimator;
  private readonly state = new KvState();

  constructor(fleet: FleetView, kv: KvEstimator) {
    this.fleet = fleet;
    this.kv = kv;
  }

  read(poolId: string, headroomRatio: number, stepMs: number, out: PoolBudget): PoolBudget {
    const fleet = this.fleet;
    const ledger = fleet.ledger;
    const st = this.state;
    const members = fleet.candidates(poolId);
    out.live = 0;
    out.counted = 0;
    out.sizeUnknown = 0;
    out.freeTokens = 0;
    out.headroomTokens = 0;
    out.wholeMaxTokens = Number.NaN;
    out.decodeDrainPerSecond = 0;
    let total = 0;
    for (let i = 0; i < members.length; i++) {
      const slot = members[i]!;
      const fresh = this.kv.read(slot, st);
      const known = !Number.isNaN(st.totalBlocks);
      if (known) {
        const whole = st.totalBlocks * st.blockSize;
        if (!(whole <= out.wholeMaxTokens)) out.wholeMaxTokens = whole;
      }
      if (!fleet.isHealthy(slot) || fleet.replica(slot).draining) continue;
      out.live++;
      if (!fresh) continue;
      if (!known) {
        out.sizeUnknown++;
        continue;
      }
      out.counted++;
      const free = st.totalBlocks - st.usedBlocks;
      if (free > 0) out.freeTokens += free * st.blockSize;
      total += st.totalBlocks * st.blockSize;
      const inflight = ledger.get(slot, LEDGER_INFLIGHT);
      const outstanding = ledger.get(slot, LEDGER_OUTSTANDING_TOKENS);
      // Scraped: every running sequence frees at least its one token per step.
      let rate = ((st.running > 1 ? st.running : 1) * 1000) / stepMs;
      if (inflight > 0 && outstanding > 0) {
        // Ours: `inflight` sequences advance one token per step, so what they hold drains in outstanding /
        // inflight steps. The larger of the two is the better estimate (both undercount the other's work).
        const ours = (ledger.get(slot, LEDGER_RESERVED_BLOCKS) * st.blockSize * inflight * 1000) / (outstanding * stepMs);
        if (ours > rate) rate = ours;
      }
      out.decodeDrainPerSecond += rate;
    }
    out.headroomTokens = total * headroomRatio;
    return out;
  }

  /**
   * The replica could serve a request of `needTokens` now and has nothing to do: healthy, not draining, none
   * of this gateway's requests in flight there (the ledger), a fresh row, and free KV for the request (its
   * headroom is for the neighbours a request could preempt: it has none). The row shows nothing running or
   * waiting; or it shows no more than this gateway had in flight there when it was scraped, all of which
   * has ended since (the ledger is empty), so what it showed is gone and its KV free. Without the second
   * case a replica stayed busy for up to a scrape interval after this gateway's last stream there ended,
   * and a request arriving then was judged by the model, which may still weigh the work just done (a
   * fresh demo gateway shed one after a burst on its 70B pool). What it cannot tell: another gateway's
   * request counted in place of one of ours that had not reached the engine when it rendered the page.
   * A stale row is unknown load, never idle.
   */
  idle(slot: number, needTokens: number): boolean {
    const fleet = this.fleet;
    if (!fleet.isHealthy(slot) || fleet.replica(slot).draining || fleet.ledger.get(slot, LEDGER_INFLIGHT) > 0) return false;
    const st = this.state;
    if (!this.kv.read(slot, st)) return false;
    const shown = st.running + st.waiting;
    if (shown === 0) return !((st.totalBlocks - st.usedBlocks) * st.blockSize < needTokens);
    return shown <= st.inflightAtScrape && !(st.totalBlocks * st.blockSize < needTokens);
  }

  /** The replica's whole KV in tokens (NaN unknown): a request larger than it can never run there. */
  wholeTokens(slot: number): number {
    const st = this.state;
    this.kv.read(slot, st);
    return st.totalBlocks * st.blockSize;
  }

  /**
   * One replica's room: its free KV tokens beyond its own headroom share. NaN when its row is stale or has no
   * KV size (unknown, so no reason to refuse it).
   */
  replicaRoom(slot: number, headroomRatio: number): number {
    const st = this.state;
    if (!this.kv.read(slot, st) || Number.isNaN(st.totalBlocks)) return Number.NaN;
    return (st.totalBlocks * (1 - headroomRatio) - st.usedBlocks) * st.blockSize;
  }
}
