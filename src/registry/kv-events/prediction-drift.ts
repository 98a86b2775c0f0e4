// The events index checks itself: per replica, the cached tokens its KV events predicted against the cached
// tokens the replica then reported (`prompt_tokens_details.cached_tokens`). Acceptor threads record each
// answered request into per-slot words of the index's SharedArrayBuffer (PredictionChecks); the kv-events
// worker drains them once per scrape interval into a DriftJudge per replica, which decides when a stream's
// events no longer describe its cache (the stream falls back and resyncs: replica-stream.ts) and when they do
// again. Thread: record() on acceptors (three Atomics.add per answered request), drain() and the judge on the
// kv-events worker (per tick and replica).
//
// Precision = confirmed / predicted over the replica's recent requests whose events prediction was a hit,
// where predicted is the cached tokens the events index predicted at dispatch (predictedCachedTokens of its
// run) and confirmed is min(predicted, reported). Only over-prediction counts: a replica that reports more
// than predicted (a block stored just after the decision, another gateway's traffic) has not contradicted the
// events. The window decays: once it holds WINDOW_TOKENS predicted tokens both sums are scaled back to it, so
// the figure follows the last ~WINDOW_TOKENS predicted tokens.
//
// Thresholds (src/registry/README.md, "The index checks itself"): a live stream falls back below 0.7 and comes
// back at 0.9 or more, each judged only with EVIDENCE_REQUESTS requests and EVIDENCE_TOKENS predicted tokens
// in the window. A correct stream's precision stays near 1: the events are the engine's own cache, and what
// separates a prediction from the engine's hit is the few milliseconds of event lag and evictions between
// dispatch and scheduling, a few percent of predicted tokens under full caches. Below 0.7 more than 30 % of
// the predicted hit tokens were not there: routing on them sends work to replicas that must recompute it and
// mispredicts TTFT, and the approximate index (learning from the gateway's own dispatches) does better. The
// gap between 0.7 and 0.9 keeps a stream near the limit from flapping; the evidence floor keeps one long
// prompt evicted in a race from deciding alone.
import { CHECK_I32, type EventsIndex } from './events-index.ts';

export const FALL_BELOW = 0.7;
export const RECOVER_AT = 0.9;
export const EVIDENCE_REQUESTS = 8;
/** 64 blocks of 16 tokens. */
export const EVIDENCE_TOKENS = 1024;
export const WINDOW_TOKENS = 32_768;

// Per-slot words (Int32) of the check region.
const PREDICTED = 0;
const CONFIRMED = 1;
const REQUESTS = 2;
/** Bumped by the worker whenever the slot's index is rebuilt: a request dispatched before does not count. */
const EPOCH = 3;
/** 1 while predictions are checked (the stream is live, or held back by drift until it agrees again). */
const CHECKING = 4;

/** What drain() hands the judge: sums since the last drain. */
export interface CheckSums {
  predicted: number;
  confirmed: number;
  requests: number;
}

/** The per-slot check words over an events index's buffer. Any thread. */
export class PredictionChecks {
  private readonly i32: Int32Array;
  private readonly base: number;

  constructor(index: EventsIndex) {
    this.i32 = new Int32Array(index.buffer);
    this.base = index.checkBase;
  }

  /** Whether requests dispatched to the slot now are checked (plain load: a word never tears). */
  checking(slot: number): boolean {
    return this.i32[this.base + slot * CHECK_I32 + CHECKING] === 1;
  }

  epoch(slot: number): number {
    return Atomics.load(this.i32, this.base + slot * CHECK_I32 + EPOCH);
  }

  /**
   * An answered request that the events predicted `predicted` cached tokens for at dispatch (in `epoch`), of
   * which the replica reported `reported`. Requests without a predicted hit tell nothing about precision.
   */
  record(slot: number, epoch: number, predicted: number, reported: number): void {
    const at = this.base + slot * CHECK_I32;
    if (!(predicted > 0) || Atomics.load(this.i32, at + EPOCH) !== epoch) return;
    Atomics.add(this.i32, at + PREDICTED, predicted);
    Atomics.add(this.i32, at + CONFIRMED, reported < predicted ? reported : predicted);
    Atomics.add(this.i32, at + REQUESTS, 1);
  }

  // ---- the kv-events worker ----

  /** Takes the sums recorded since the last drain (each word swapped with 0: no record is lost or counted twice). */
  drain(slot: number, out: CheckSums): CheckSums {
    const at = this.base + slot * CHECK_I32;
    out.predicted = Atomics.exchange(this.i32, at + PREDICTED, 0);
    out.confirmed = Atomics.exchange(this.i32, at + CONFIRMED, 0);
    out.requests = Atomics.exchange(this.i32, at + REQUESTS, 0);
    return out;
  }

  setChecking(slot: number, on: boolean): void {
    Atomics.store(this.i32, this.base + slot * CHECK_I32 + CHECKING, on ? 1 : 0);
  }

  /** The slot's index was rebuilt: requests dispatched before are not evidence about it. */
  nextEpoch(slot: number): void {
    Atomics.add(this.i32, this.base + slot * CHECK_I32 + EPOCH, 1);
  }
}

export type Verdict = 'drifted' | 'agrees' | 'undecided';

/** One replica's decaying precision window. The kv-events worker. */
export class DriftJudge {
  private predicted = 0;
  private confirmed = 0;
  private requests = 0;

  add(s: CheckSums): void {
    this.predicted += s.predicted;
    this.confirmed += s.confirmed;
    this.requests += s.requests;
    if (this.predicted > WINDOW_TOKENS) {
      const k = WINDOW_TOKENS / this.predicted;
      this.predicted = WINDOW_TOKENS;
      this.confirmed *= k;
      this.requests = Math.max(EVIDENCE_REQUESTS, this.requests * k);
    }
  }

  /** confirmed / predicted over the window; NaN without the evidence floor. */
  precision(): number {
    if (this.requests < EVIDENCE_REQUESTS || this.predicted < EVIDENCE_TOKENS) return Number.NaN;
    return this.confirmed / this.predicted;
  }

  /** For a live stream (`live`) or one held back by drift: whether its events disagree, agree, or it is too soon. */
  verdict(live: boolean): Verdict {
    const p = this.precision();
    if (Number.isNaN(p)) return 'undecided';
    if (live) return p < FALL_BELOW ? 'drifted' : 'undecided';
    return p >= RECOVER_AT ? 'agrees' : 'undecided';
  }

  reset(): void {
    this.predicted = 0;
    this.confirmed = 0;
    this.requests = 0;
  }
}
