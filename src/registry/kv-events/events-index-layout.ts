// The events index's buffer layout and the per-slot words' vocabulary (events-index.ts has the structure and
// why it is laid out so): header words, a bucket's words, the stream states, fallback reasons and counters.
// Thread: any (constants only).

export const WAYS = 8;
export const MAGIC = 0x4b564556; // 'KVEV'
export const VALID = 0x40000000; // set in a way's high word (hash high bits are < 2^21)
// A bucket's words: the seqlock, the reach, the taken-ways mask, the WAYS low words, then per way its high
// word and its bitmap (1 + words), from the second cache line.
export const B_VERSION = 0;
export const B_REACH = 1;
export const B_TAKEN = 2;
export const B_LO = 3;
export const B_WAYS = 16;
export const FULL_MASK = (1 << WAYS) - 1;

// Header, Int32 words.
export const H_MAGIC = 0;
export const H_SLOTS = 1;
export const H_BUCKETS = 2;
export const H_WORDS = 3;
export const H_ENTRIES = 4;
export const H_OVERFLOWS = 5;
export const HEADER_I32 = 16;

/** A slot's stream state (the STATE word). */
export const StreamState = {
  /** No events for this slot: the approximate index serves it. */
  Off: 0,
  /** Events flow and the index is exact: it serves this slot's lookups. */
  Live: 1,
  /** Events configured but silent, broken, or resyncing: the approximate index serves. */
  Fallback: 2,
} as const;
export type StreamStateValue = (typeof StreamState)[keyof typeof StreamState];

/** Why a slot last fell back (the REASON word); also the fallback counters' order. */
export const FallbackReason = { None: 0, Silent: 1, Broken: 2, Gap: 3, Overflow: 4, Restart: 5, Drift: 6 } as const;
export const FALLBACK_REASONS = ['silent', 'broken', 'gap', 'overflow', 'restart', 'drift'] as const;
export type FallbackReasonName = (typeof FALLBACK_REASONS)[number];

/** Per-slot counters (Float64, written by the worker only). */
export const Stat = {
  Events: 0, Batches: 1, Gaps: 2, Replays: 3, Replayed: 4, Unmapped: 5, Blocks: 6, LagSeconds: 7, LastSeq: 8,
  /** FALLBACKS + reason index − 1: fallbacks by reason (6 of them). */
  Fallbacks: 9,
  /** The pool's block size (set at assignment): acceptors turn predicted blocks into tokens with it. */
  BlockSize: 15,
  /** Share of the events-predicted cached tokens the replica confirmed (prediction-drift.ts); NaN: no evidence yet. */
  Precision: 16,
} as const;
export const STATS_F64 = 17;
/** Int32 words per slot of the prediction-check region, after the buckets (prediction-drift.ts). */
export const CHECK_I32 = 8;
