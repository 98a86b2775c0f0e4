// The replica table's SharedArrayBuffer layout: one fixed row per replica slot, numbers only. This file only
// names offsets; every Atomics call on the table lives in replica-table.ts. Shared by the main thread, the
// poller thread (the single writer) and any reader thread. Not code on the hot path itself, but every offset
// here is read per routing decision, so the row is kept to three cache lines (192 bytes).
//
// Each row is viewed twice: as Int32 words (header, Atomics-friendly) and as Float64 words (data, plain
// reads inside the seqlock). Drawn in src/registry/README.md.

/** Bytes per row. A multiple of 8 (Float64 alignment) and of 64 (no false sharing between rows). */
export const ROW_STRIDE_BYTES = 192;
export const ROW_STRIDE_I32 = ROW_STRIDE_BYTES / 4;
export const ROW_STRIDE_F64 = ROW_STRIDE_BYTES / 8;

// ---- Int32 header words (index within the row, in Int32 units) -------------------------------------------
/** Seqlock word: odd while the poller writes the row, bumped by 2 per completed write. */
export const I_VERSION = 0;
/** Changes whenever what the row describes changes identity: slot (re)assigned, or the replica restarted. */
export const I_GENERATION = 1;
/** Membership token chosen by the main thread per assignment; 0 = slot empty. Lets a reader tell a row of
 * the replica it expects from a row still describing the slot's previous occupant. */
export const I_ASSIGN_ID = 2;
/** One of ROW_STATE. */
export const I_STATE = 3;
/** Bit set of ROW_FLAG. */
export const I_FLAGS = 4;
/** Consecutive failed scrapes (metrics or health). */
export const I_SCRAPE_FAILURES = 5;
/** Consecutive data-plane connection failures. NOT covered by the version word: any thread updates it with
 * Atomics.add / Atomics.store (see ReplicaTable.reportDataPlaneFailure). */
export const I_DATA_PLANE_FAILURES = 6;
/** Bumped by the poller each time the resident adapter set changes (the names travel by message). */
export const I_ADAPTER_EPOCH = 7;
/** Restarts observed since the slot was assigned. */
export const I_RESTARTS = 8;
export const I_RUNNING_ADAPTERS = 9;
export const I_WAITING_ADAPTERS = 10;
/**
 * This gateway's requests in flight on the replica (the in-flight ledger's count) when the poller sent the
 * last good scrape. A row whose running + waiting is no more than this shows only work this gateway had
 * there; once all of it has ended the replica is idle, without waiting for the next scrape to say so.
 */
export const I_INFLIGHT_AT_SCRAPE = 11;
/** Int32 words 12..15 are reserved; Float64 data starts at byte 64 (the second cache line). */
export const HEADER_I32 = 16;

// ---- Float64 data words (index within the row, in Float64 units) -----------------------------------------
const F0 = HEADER_I32 / 2;
/** Date.now() of the last scrape that returned a parsable /metrics page and a 2xx /health. 0 = never. */
export const F_LAST_GOOD_SCRAPE_MS = F0 + 0;
/** Date.now() of the last scrape attempt's completion (good or not). */
export const F_LAST_ATTEMPT_MS = F0 + 1;
export const F_RUNNING = F0 + 2;
export const F_WAITING = F0 + 3;
/** KV cache usage, 0..1 (vllm:kv_cache_usage_perc or legacy vllm:gpu_cache_usage_perc). NaN = not exposed. */
export const F_KV_USAGE = F0 + 4;
/** From vllm:cache_config_info; NaN = not exposed. */
export const F_NUM_GPU_BLOCKS = F0 + 5;
export const F_BLOCK_SIZE = F0 + 6;
/** max_lora label of vllm:lora_requests_info; 0 = LoRA not enabled on the replica. */
export const F_MAX_LORAS = F0 + 7;
export const F_PREEMPTIONS_TOTAL = F0 + 8;
export const F_PREFIX_QUERIES_TOTAL = F0 + 9;
export const F_PREFIX_HITS_TOTAL = F0 + 10;
/** hits/queries over the last scrape interval in which queries grew; NaN until known. */
export const F_PREFIX_HIT_RATE = F0 + 11;
/** Preemptions counted during the last scrape interval. */
export const F_PREEMPTIONS_DELTA = F0 + 12;
/** process_start_time_seconds, else the earliest vllm:*_created; NaN when the replica exposes neither. */
export const F_PROCESS_START_SECONDS = F0 + 13;
/** Round-trip time of the last good /metrics scrape. */
export const F_SCRAPE_LATENCY_MS = F0 + 14;
/**
 * Date.now() of the last scrape that saw the replica's engine move: its prompt, generation or prefix-query
 * token counters changed since the scrape before (or the page has none of them, so a good scrape is all the
 * evidence there is; or it was the first scrape). The stall watch (src/pipeline/stall-watch.ts) compares it
 * with LAST_ATTEMPT_MS. 0 = never.
 */
export const F_LAST_PROGRESS_MS = F0 + 15;
export const DATA_F64 = ROW_STRIDE_F64 - F0;

/** Row health as the poller sees it. Data-plane failures are layered on top by ReplicaTable.isHealthy. */
export const ROW_STATE = {
  /** No replica in this slot. */
  EMPTY: 0,
  /** Assigned; no scrape has completed yet. Not in rotation. */
  UNKNOWN: 1,
  UP: 2,
  /** down_after_failures consecutive scrapes failed. */
  DOWN: 3,
} as const;
export type RowState = (typeof ROW_STATE)[keyof typeof ROW_STATE];

export const ROW_FLAG = {
  /** The replica's block_size differs from its pool's: its prefix-cache affinity must not be used. */
  PREFIX_AFFINITY_OFF: 1 << 0,
  /** The replica speaks the V1 metric names (kv_cache_usage_perc, prefix_cache_*). */
  METRICS_V1: 1 << 1,
  /** The replica speaks the legacy gpu_* names only. */
  METRICS_LEGACY: 1 << 2,
  /** vllm:lora_requests_info is present (the replica runs with --enable-lora). */
  LORA_ENABLED: 1 << 3,
  /** The last failed scrape was refused or reset (process gone), not a timeout or a bad status. */
  UNREACHABLE: 1 << 4,
} as const;

export function tableBytes(slots: number): number {
  return slots * ROW_STRIDE_BYTES;
}
