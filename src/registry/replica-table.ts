// The replica table over a SharedArrayBuffer: the only file that touches it with Atomics. One writer (the
// poller thread, through ReplicaTableWriter) and any number of readers on any thread (ReplicaTable.read).
// Thread: any. Hot path: read() and the single-word accessors run per candidate per routing decision; they
// allocate nothing. Cost measured in native-bench/scenarios/registry.ts.
//
// Seqlock: the writer makes the row's version odd, writes the row with plain stores, makes it even again.
// A reader copies the row between two Atomics.load of the version and keeps the copy only when both loads
// return the same even value (cost: ~50 ns CPU per row, native-bench registry). Atomics operations are sequentially consistent and V8 does not move plain
// accesses across them, so a copy bracketed by two equal even versions was not overlapped by a write.
import {
  F_BLOCK_SIZE, F_KV_USAGE, F_LAST_ATTEMPT_MS, F_LAST_GOOD_SCRAPE_MS, F_LAST_PROGRESS_MS, F_MAX_LORAS, F_NUM_GPU_BLOCKS,
  F_PREEMPTIONS_DELTA, F_PREEMPTIONS_TOTAL, F_PREFIX_HIT_RATE, F_PREFIX_HITS_TOTAL, F_PREFIX_QUERIES_TOTAL,
  F_PROCESS_START_SECONDS, F_RUNNING, F_SCRAPE_LATENCY_MS, F_WAITING, I_ADAPTER_EPOCH, I_ASSIGN_ID,
  I_DATA_PLANE_FAILURES, I_FLAGS, I_GENERATION, I_INFLIGHT_AT_SCRAPE, I_RESTARTS, I_RUNNING_ADAPTERS, I_SCRAPE_FAILURES, I_STATE,
  I_VERSION, I_WAITING_ADAPTERS, ROW_STATE, ROW_STRIDE_BYTES, ROW_STRIDE_F64, ROW_STRIDE_I32,
} from './replica-table-layout.ts';

/** A reader's copy of one row (also the writer's source). Fixed shape: allocate one per reader and reuse it. */
export class ReplicaRow {
  generation = 0;
  assignId = 0;
  state = 0;
  flags = 0;
  scrapeFailures = 0;
  /** Read outside the seqlock (it has its own writers); a snapshot, not part of the consistent row. */
  dataPlaneFailures = 0;
  adapterEpoch = 0;
  restarts = 0;
  runningAdapterCount = 0;
  waitingAdapterCount = 0;
  /** This gateway's requests in flight there when the last good scrape was sent (I_INFLIGHT_AT_SCRAPE). */
  inflightAtScrape = 0;
  lastGoodScrapeMs = 0;
  lastAttemptMs = 0;
  running = 0;
  waiting = 0;
  kvUsage = Number.NaN;
  numGpuBlocks = Number.NaN;
  blockSize = Number.NaN;
  maxLoras = 0;
  preemptionsTotal = 0;
  prefixQueriesTotal = 0;
  prefixHitsTotal = 0;
  prefixHitRate = Number.NaN;
  preemptionsDelta = 0;
  processStartSeconds = Number.NaN;
  scrapeLatencyMs = 0;
  lastProgressMs = 0;

  /** Back to the state of a freshly assigned slot, keeping nothing from a previous occupant. */
  clearData(): void {
    this.flags = 0;
    this.scrapeFailures = 0;
    this.dataPlaneFailures = 0;
    this.adapterEpoch = 0;
    this.restarts = 0;
    this.runningAdapterCount = 0;
    this.waitingAdapterCount = 0;
    this.inflightAtScrape = 0;
    this.lastGoodScrapeMs = 0;
    this.lastAttemptMs = 0;
    this.running = 0;
    this.waiting = 0;
    this.kvUsage = Number.NaN;
    this.numGpuBlocks = Number.NaN;
    this.blockSize = Number.NaN;
    this.maxLoras = 0;
    this.preemptionsTotal = 0;
    this.prefixQueriesTotal = 0;
    this.prefixHitsTotal = 0;
    this.prefixHitRate = Number.NaN;
    this.preemptionsDelta = 0;
    this.processStartSeconds = Number.NaN;
    this.scrapeLatencyMs = 0;
    this.lastProgressMs = 0;
  }
}

/** A torn read is retried this many times before read() gives up; a write takes well under a microsecond,
 * so reaching the limit means a writer died mid-row (the poller thread crashed), not contention. */
const MAX_READ_ATTEMPTS = 1000;

export class ReplicaTable {
  readonly buffer: SharedArrayBuffer;
  readonly slots: number;
  protected readonly i32: Int32Array;
  protected readonly f64: Float64Array;
  /** Torn reads detected and retried since this view was created (diagnostics and tests). */
  tornReads = 0;

  /**
   * The writer and every reader are one thread (the simulator's run): the seqlock's version word is read and
   * written with plain loads and stores, which V8 inlines, where Atomics calls are not. A kv-aware decision
   * reads every candidate's row; at 5,000 requests/s those reads were 7 % of a seed-mix run's CPU.
   */
  protected readonly sameThread: boolean;

  constructor(slotsOrBuffer: number | SharedArrayBuffer, sameThread = false) {
    this.sameThread = sameThread;
    this.buffer = typeof slotsOrBuffer === 'number'
      ? new SharedArrayBuffer(slotsOrBuffer * ROW_STRIDE_BYTES)
      : slotsOrBuffer;
    if (this.buffer.byteLength % ROW_STRIDE_BYTES !== 0) throw new RangeError('replica table buffer is not a whole number of rows');
    this.i32 = new Int32Array(this.buffer);
    this.f64 = new Float64Array(this.buffer);
    this.slots = this.buffer.byteLength / ROW_STRIDE_BYTES;
  }

  /**
   * Copies a consistent snapshot of the slot's row into `out`. Returns false when the slot is empty or no
   * consistent copy could be taken (writer died mid-write); `out` is then unspecified.
   */
  read(slot: number, out: ReplicaRow): boolean {
    const i32 = this.i32;
    const f64 = this.f64;
    const ib = slot * ROW_STRIDE_I32;
    const fb = slot * ROW_STRIDE_F64;
    for (let attempt = 0; attempt < MAX_READ_ATTEMPTS; attempt++) {
      const v1 = this.sameThread ? i32[ib + I_VERSION]! : Atomics.load(i32, ib + I_VERSION);
      if ((v1 & 1) === 0) {
        out.generation = i32[ib + I_GENERATION]!;
        out.assignId = i32[ib + I_ASSIGN_ID]!;
        out.state = i32[ib + I_STATE]!;
        out.flags = i32[ib + I_FLAGS]!;
        out.scrapeFailures = i32[ib + I_SCRAPE_FAILURES]!;
        out.adapterEpoch = i32[ib + I_ADAPTER_EPOCH]!;
        out.restarts = i32[ib + I_RESTARTS]!;
        out.runningAdapterCount = i32[ib + I_RUNNING_ADAPTERS]!;
        out.waitingAdapterCount = i32[ib + I_WAITING_ADAPTERS]!;
        out.inflightAtScrape = i32[ib + I_INFLIGHT_AT_SCRAPE]!;
        out.lastGoodScrapeMs = f64[fb + F_LAST_GOOD_SCRAPE_MS]!;
        out.lastAttemptMs = f64[fb + F_LAST_ATTEMPT_MS]!;
        out.running = f64[fb + F_RUNNING]!;
        out.waiting = f64[fb + F_WAITING]!;
        out.kvUsage = f64[fb + F_KV_USAGE]!;
        out.numGpuBlocks = f64[fb + F_NUM_GPU_BLOCKS]!;
        out.blockSize = f64[fb + F_BLOCK_SIZE]!;
        out.maxLoras = f64[fb + F_MAX_LORAS]!;
        out.preemptionsTotal = f64[fb + F_PREEMPTIONS_TOTAL]!;
        out.prefixQueriesTotal = f64[fb + F_PREFIX_QUERIES_TOTAL]!;
        out.prefixHitsTotal = f64[fb + F_PREFIX_HITS_TOTAL]!;
        out.prefixHitRate = f64[fb + F_PREFIX_HIT_RATE]!;
        out.preemptionsDelta = f64[fb + F_PREEMPTIONS_DELTA]!;
        out.processStartSeconds = f64[fb + F_PROCESS_START_SECONDS]!;
        out.scrapeLatencyMs = f64[fb + F_SCRAPE_LATENCY_MS]!;
        out.lastProgressMs = f64[fb + F_LAST_PROGRESS_MS]!;
        if (this.sameThread || Atomics.load(i32, ib + I_VERSION) === v1) {
          out.dataPlaneFailures = i32[ib + I_DATA_PLANE_FAILURES]!;
          return out.state !== ROW_STATE.EMPTY;
        }
      }
      this.tornReads++;
    }
    return false;
  }

  // Single-word reads are plain loads: TypedArray element accesses are tear-free in the ECMAScript memory
  // model, so each returns a value some write stored; they are not ordered with the rest of the row (use
  // read() for a consistent set). Never spin on them: the JIT may hoist a plain load out of a loop.
  // Atomics.load is a builtin call in Node 20's V8, about 3x the cost of this path over 64 rows
  // (native-bench registry: 'hot checks').
  state(slot: number): number {
    return this.i32[slot * ROW_STRIDE_I32 + I_STATE]!;
  }

  generation(slot: number): number {
    return this.i32[slot * ROW_STRIDE_I32 + I_GENERATION]!;
  }

  assignId(slot: number): number {
    return this.i32[slot * ROW_STRIDE_I32 + I_ASSIGN_ID]!;
  }

  flags(slot: number): number {
    return this.i32[slot * ROW_STRIDE_I32 + I_FLAGS]!;
  }

  adapterEpoch(slot: number): number {
    return this.i32[slot * ROW_STRIDE_I32 + I_ADAPTER_EPOCH]!;
  }

  dataPlaneFailures(slot: number): number {
    return this.i32[slot * ROW_STRIDE_I32 + I_DATA_PLANE_FAILURES]!;
  }

  lastGoodScrapeMs(slot: number): number {
    return this.f64[slot * ROW_STRIDE_F64 + F_LAST_GOOD_SCRAPE_MS]!;
  }

  /** When the poller last finished a scrape of the replica, good or failed (Date.now() on its thread). */
  lastAttemptMs(slot: number): number {
    return this.f64[slot * ROW_STRIDE_F64 + F_LAST_ATTEMPT_MS]!;
  }

  /** When a scrape last saw the replica's engine move (F_LAST_PROGRESS_MS). */
  lastProgressMs(slot: number): number {
    return this.f64[slot * ROW_STRIDE_F64 + F_LAST_PROGRESS_MS]!;
  }

  kvUsage(slot: number): number {
    return this.f64[slot * ROW_STRIDE_F64 + F_KV_USAGE]!;
  }

  waiting(slot: number): number {
    return this.f64[slot * ROW_STRIDE_F64 + F_WAITING]!;
  }

  running(slot: number): number {
    return this.f64[slot * ROW_STRIDE_F64 + F_RUNNING]!;
  }

  numGpuBlocks(slot: number): number {
    return this.f64[slot * ROW_STRIDE_F64 + F_NUM_GPU_BLOCKS]!;
  }

  /** A connection to the replica was refused or reset on the data plane. Any thread. Returns the new count. */
  reportDataPlaneFailure(slot: number): number {
    return Atomics.add(this.i32, slot * ROW_STRIDE_I32 + I_DATA_PLANE_FAILURES, 1) + 1;
  }

  /** The data plane reached the replica. Loads first so the common case (already 0) writes nothing. */
  reportDataPlaneSuccess(slot: number): void {
    const idx = slot * ROW_STRIDE_I32 + I_DATA_PLANE_FAILURES;
    if (Atomics.load(this.i32, idx) !== 0) Atomics.store(this.i32, idx, 0);
  }
}

/**
 * The poller thread's handle. Exactly one instance may exist per buffer (the single-writer rule); the
 * registry creates it only inside the poller worker.
 */
export class ReplicaTableWriter extends ReplicaTable {
  /** Writes every seqlocked field of `row` into the slot. */
  write(slot: number, row: ReplicaRow): void {
    const i32 = this.i32;
    const f64 = this.f64;
    const ib = slot * ROW_STRIDE_I32;
    const fb = slot * ROW_STRIDE_F64;
    const v = Atomics.load(i32, ib + I_VERSION);
    Atomics.store(i32, ib + I_VERSION, (v + 1) | 0);
    i32[ib + I_GENERATION] = row.generation;
    i32[ib + I_ASSIGN_ID] = row.assignId;
    i32[ib + I_FLAGS] = row.flags;
    i32[ib + I_SCRAPE_FAILURES] = row.scrapeFailures;
    i32[ib + I_ADAPTER_EPOCH] = row.adapterEpoch;
    i32[ib + I_RESTARTS] = row.restarts;
    i32[ib + I_RUNNING_ADAPTERS] = row.runningAdapterCount;
    i32[ib + I_WAITING_ADAPTERS] = row.waitingAdapterCount;
    i32[ib + I_INFLIGHT_AT_SCRAPE] = row.inflightAtScrape;
    f64[fb + F_LAST_GOOD_SCRAPE_MS] = row.lastGoodScrapeMs;
    f64[fb + F_LAST_ATTEMPT_MS] = row.lastAttemptMs;
    f64[fb + F_RUNNING] = row.running;
    f64[fb + F_WAITING] = row.waiting;
    f64[fb + F_KV_USAGE] = row.kvUsage;
    f64[fb + F_NUM_GPU_BLOCKS] = row.numGpuBlocks;
    f64[fb + F_BLOCK_SIZE] = row.blockSize;
    f64[fb + F_MAX_LORAS] = row.maxLoras;
    f64[fb + F_PREEMPTIONS_TOTAL] = row.preemptionsTotal;
    f64[fb + F_PREFIX_QUERIES_TOTAL] = row.prefixQueriesTotal;
    f64[fb + F_PREFIX_HITS_TOTAL] = row.prefixHitsTotal;
    f64[fb + F_PREFIX_HIT_RATE] = row.prefixHitRate;
    f64[fb + F_PREEMPTIONS_DELTA] = row.preemptionsDelta;
    f64[fb + F_PROCESS_START_SECONDS] = row.processStartSeconds;
    f64[fb + F_SCRAPE_LATENCY_MS] = row.scrapeLatencyMs;
    f64[fb + F_LAST_PROGRESS_MS] = row.lastProgressMs;
    // State last and atomically: single-word readers (isHealthy) never see UP before the data it stands for.
    Atomics.store(i32, ib + I_STATE, row.state);
    Atomics.store(i32, ib + I_VERSION, (v + 2) | 0);
  }

  /** Assignment resets the data-plane word too: the slot's previous occupant's failures are not this one's. */
  resetDataPlaneFailures(slot: number): void {
    Atomics.store(this.i32, slot * ROW_STRIDE_I32 + I_DATA_PLANE_FAILURES, 0);
  }

  /** Half-open recovery: clears data-plane failures only if nobody added one since `seen` was read. */
  clearDataPlaneFailuresIf(slot: number, seen: number): boolean {
    const idx = slot * ROW_STRIDE_I32 + I_DATA_PLANE_FAILURES;
    return Atomics.compareExchange(this.i32, idx, seen, 0) === seen;
  }
}
