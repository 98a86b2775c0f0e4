// Per-replica scrape bookkeeping: turns one scrape outcome into the replica's next row and a set of events
// (state change, restart, adapter set change, block-size mismatch). Pure logic, no I/O, no clock.
// Thread: poller (unit-tested on the main thread). Runs once per replica per scrape; allocates only when an
// event fires.
//
// Health: down after `downAfterFailures` consecutive failed scrapes, up on the first good one.
// Restart: process start time changed by more than a second; else a monotonic counter went backwards; else,
// when the replica exposes no start time at all, coming back after being unreachable counts as a restart
// (dropping prefix knowledge for a replica that did not restart costs a few cache misses; keeping it for one
// that did costs as many misrouted requests).
import { ReplicaRow } from '../replica-table.ts';
import { ROW_FLAG, ROW_STATE } from '../replica-table-layout.ts';
import { FAILURE_KIND, type FailureKind } from './protocol.ts';
import { splitAdapters, type ParsedMetrics } from './vllm-metrics-parser.ts';

export const EVENT = {
  STATE: 1 << 0,
  RESTART: 1 << 1,
  ADAPTERS: 1 << 2,
  BLOCK_SIZE_MISMATCH: 1 << 3,
} as const;

/** Start times closer than this are the same process (prometheus_client reports them with float jitter). */
const START_TIME_TOLERANCE_SECONDS = 1;

export class ReplicaTracker {
  readonly row = new ReplicaRow();
  readonly slot: number;
  readonly assignId: number;
  readonly replicaId: string;
  readonly url: string;
  readonly poolBlockSize: number;
  /** Set after the first completed attempt has been reported to the main thread. */
  firstReported = false;
  /** Why the last state change or restart happened; read by the poller when it posts the event. */
  reason = '';
  runningAdapters: string[] = [];
  waitingAdapters: string[] = [];

  private hasBaseline = false;
  private prevStartSeconds = Number.NaN;
  private prevPrefixQueries = Number.NaN;
  private prevPrefixHits = Number.NaN;
  private prevPromptTokens = Number.NaN;
  private prevGenerationTokens = Number.NaN;
  private prevPreemptions = Number.NaN;
  /** Sum of the engine's progress counters at the last good scrape (NaN: none on the page). */
  private prevProgress = Number.NaN;
  private runningAdaptersRaw = '';
  private waitingAdaptersRaw = '';
  private reportedBlockSize = Number.NaN;

  constructor(slot: number, assignId: number, replicaId: string, url: string, poolBlockSize: number) {
    this.slot = slot;
    this.assignId = assignId;
    this.replicaId = replicaId;
    this.url = url;
    this.poolBlockSize = poolBlockSize;
  }

  /**
   * A scrape returned a vLLM page and a 2xx /health. `inflightAtScrape`: this gateway's requests in flight
   * on the replica when the scrape was sent (the ledger's count; 0 when the poller has no ledger). Returns
   * EVENT bits.
   */
  onGood(m: ParsedMetrics, nowMs: number, latencyMs: number, inflightAtScrape = 0): number {
    const row = this.row;
    let events = 0;
    const wasUnreachable = (row.flags & ROW_FLAG.UNREACHABLE) !== 0 && row.state === ROW_STATE.DOWN;
    const start = m.startSeconds();

    if (this.hasBaseline) {
      let restartReason = '';
      if (!Number.isNaN(start) && !Number.isNaN(this.prevStartSeconds) &&
        Math.abs(start - this.prevStartSeconds) > START_TIME_TOLERANCE_SECONDS) {
        restartReason = `process start time changed (${this.prevStartSeconds} -> ${start})`;
      } else if (wentBack(m.prefixQueriesTotal, this.prevPrefixQueries) || wentBack(m.promptTokensTotal, this.prevPromptTokens) ||
        wentBack(m.generationTokensTotal, this.prevGenerationTokens) || wentBack(m.preemptionsTotal, this.prevPreemptions)) {
        restartReason = 'counters went backwards';
      } else if (Number.isNaN(start) && wasUnreachable) {
        restartReason = 'back after being unreachable, and it exposes no start time';
      }
      if (restartReason !== '') {
        row.generation = (row.generation + 1) | 0;
        row.restarts++;
        this.reason = restartReason;
        this.prevPrefixQueries = Number.NaN; // the hit-rate baseline belongs to the old process
        this.prevPrefixHits = Number.NaN;
        this.prevPreemptions = Number.NaN;
        events |= EVENT.RESTART;
      }
    }

    // Interval figures from counter deltas; a counter absent on the page leaves its figure unknown.
    const dq = m.prefixQueriesTotal - this.prevPrefixQueries;
    if (dq > 0) row.prefixHitRate = Math.min(1, Math.max(0, (m.prefixHitsTotal - this.prevPrefixHits) / dq));
    const dp = m.preemptionsTotal - this.prevPreemptions;
    row.preemptionsDelta = dp > 0 ? dp : 0;

    // Progress (src/pipeline/stall-watch.ts): the engine's token counters moved since the last good scrape.
    // Any change counts, backwards too (a restart is a new process, judged afresh); a page without them, or
    // the first scrape, counts as progress: no evidence of a stall is never taken for one.
    const progress = progressSum(m);
    if (!this.hasBaseline || Number.isNaN(progress) || progress !== this.prevProgress) row.lastProgressMs = nowMs;
    this.prevProgress = progress;

    this.hasBaseline = true;
    this.prevStartSeconds = start;
    this.prevPrefixQueries = m.prefixQueriesTotal;
    this.prevPrefixHits = m.prefixHitsTotal;
    this.prevPromptTokens = m.promptTokensTotal;
    this.prevGenerationTokens = m.generationTokensTotal;
    this.prevPreemptions = m.preemptionsTotal;

    row.lastGoodScrapeMs = nowMs;
    row.lastAttemptMs = nowMs;
    row.scrapeLatencyMs = latencyMs;
    row.running = Number.isNaN(m.running) ? 0 : m.running;
    row.waiting = Number.isNaN(m.waiting) ? 0 : m.waiting;
    row.inflightAtScrape = inflightAtScrape;
    row.kvUsage = m.kvUsage;
    row.numGpuBlocks = m.numGpuBlocks;
    row.blockSize = m.blockSize;
    row.maxLoras = m.maxLoras;
    row.preemptionsTotal = Number.isNaN(m.preemptionsTotal) ? 0 : m.preemptionsTotal;
    row.prefixQueriesTotal = Number.isNaN(m.prefixQueriesTotal) ? 0 : m.prefixQueriesTotal;
    row.prefixHitsTotal = Number.isNaN(m.prefixHitsTotal) ? 0 : m.prefixHitsTotal;
    row.processStartSeconds = start;
    row.scrapeFailures = 0;

    let flags = row.flags & ~(ROW_FLAG.METRICS_V1 | ROW_FLAG.METRICS_LEGACY | ROW_FLAG.LORA_ENABLED | ROW_FLAG.UNREACHABLE | ROW_FLAG.PREFIX_AFFINITY_OFF);
    if (m.speaksV1) flags |= ROW_FLAG.METRICS_V1;
    else if (m.speaksLegacy) flags |= ROW_FLAG.METRICS_LEGACY;
    if (m.loraEnabled) flags |= ROW_FLAG.LORA_ENABLED;
    // A replica that does not say its block size keeps affinity: vLLM has exposed cache_config_info since V0.
    if (!Number.isNaN(m.blockSize) && m.blockSize !== this.poolBlockSize) {
      flags |= ROW_FLAG.PREFIX_AFFINITY_OFF;
      if (m.blockSize !== this.reportedBlockSize) events |= EVENT.BLOCK_SIZE_MISMATCH;
    }
    this.reportedBlockSize = m.blockSize;
    row.flags = flags;

    if (m.runningAdapters !== this.runningAdaptersRaw || m.waitingAdapters !== this.waitingAdaptersRaw) {
      this.runningAdaptersRaw = m.runningAdapters;
      this.waitingAdaptersRaw = m.waitingAdapters;
      this.runningAdapters = splitAdapters(m.runningAdapters);
      this.waitingAdapters = splitAdapters(m.waitingAdapters);
      row.runningAdapterCount = this.runningAdapters.length;
      row.waitingAdapterCount = this.waitingAdapters.length;
      row.adapterEpoch = (row.adapterEpoch + 1) | 0;
      events |= EVENT.ADAPTERS;
    }

    if (row.state !== ROW_STATE.UP) {
      row.state = ROW_STATE.UP;
      if ((events & EVENT.RESTART) === 0) this.reason = 'scrape succeeded';
      events |= EVENT.STATE;
    }
    return events;
  }

  /** A scrape failed. Returns EVENT bits. */
  onFailure(kind: FailureKind, detail: string, nowMs: number, downAfterFailures: number): number {
    const row = this.row;
    row.lastAttemptMs = nowMs;
    row.scrapeFailures++;
    if (kind === FAILURE_KIND.UNREACHABLE) row.flags |= ROW_FLAG.UNREACHABLE;
    else row.flags &= ~ROW_FLAG.UNREACHABLE;
    if (row.scrapeFailures >= downAfterFailures && row.state !== ROW_STATE.DOWN) {
      row.state = ROW_STATE.DOWN;
      this.reason = `${row.scrapeFailures} consecutive failed scrapes, last: ${kind}${detail ? ` (${detail})` : ''}`;
      return EVENT.STATE;
    }
    return 0;
  }
}

/**
 * Prompt tokens (counted when a prefill completes), generation tokens (every decode step) and prefix-cache
 * queries (when a request is scheduled): one of them moves whenever the engine schedules or finishes work.
 * NaN when the page has none of them.
 */
function progressSum(m: ParsedMetrics): number {
  let sum = Number.NaN;
  if (!Number.isNaN(m.promptTokensTotal)) sum = m.promptTokensTotal;
  if (!Number.isNaN(m.generationTokensTotal)) sum = (Number.isNaN(sum) ? 0 : sum) + m.generationTokensTotal;
  if (!Number.isNaN(m.prefixQueriesTotal)) sum = (Number.isNaN(sum) ? 0 : sum) + m.prefixQueriesTotal;
  return sum;
}

function wentBack(current: number, previous: number): boolean {
  return current < previous; // false when either is NaN
}
