// Per-stream TPOT slack: which of a replica's streams a new request's prefill would push past their TPOT.
// The replica-wide TPOT (decode step / (1 − ρ)) is an average; a stream's SLO is its own mean gap, and a short
// stream has few gaps to spread a stall over. A stream of N output tokens at decode step s ends with
//   TPOT = ((N − 1) × s + P) / (N − 1)          P: the prefill (ms) done in its steps between first and last token
// so it meets a target T while P ≤ slack = (N − 1)(T − s). What it has absorbed so far is the prefill the
// replica did since its first token (the model's doneWork); the tokens it has left follow from the decode
// time elapsed: r = N − 1 − (now − first − P_done) / s. Prefill still to come lands in its remaining steps, at
// most one chunk (token budget − batch) a step: a stall min(W / rate, r × chunk / rate) for W of work.
// A request with `own` work, queued behind `ahead`, harms a stream when the stall of `ahead` alone still fits
// its slack and that of `ahead + own` does not: the request turns that stream from a hit into a miss.
// A stream still prefilling has absorbed nothing, has all N − 1 gaps to come, and sees only the work sent
// after it (FCFS). N is the reply's length as forecast (reply-length/: SLACK_QUANTILE of its cell, at most
// max_tokens); a stream still streaming past it is no stream about to end but one whose length is now known
// to exceed it: its N becomes the forecast given the tokens it has produced (then kept), instead of dropping
// out of the count. Without a forecast max_tokens is N.
// Cost: O(streams on the replica) per prediction, no allocation; a record per in-flight request.
// Records are pooled and reused. What add() hands out is a handle, the record's index and its generation: a
// record freed (the request ended, or its replica restarted: reset) takes a new generation, so a request that
// still holds the old handle can neither unlink nor stamp the stream that reuses the record.
// Layout: harm() reads each stream's four figures from its slot's packed array (PACKED figures a stream,
// side by side; a removal moves the slot's last stream into the hole), a sequential read the prefetcher
// follows. A linked list over per-record arrays made every stream a chain of dependent loads on five arrays:
// at 5,000 requests/s a seed-mix run spent 44 % of its CPU in harm() (131 streams a pass). harm()'s figures
// (a count and two maxima) do not depend on the order it visits the streams in.
// Thread: the acceptor (one per GpuTimeModel).

/** A stream's reply forecast as harm() revises it (reply-length/reply-forecast.ts). */
export interface SlackReply {
  slackAfter(produced: number): number;
}

/** Records in the pool grow by doubling from this. */
const INITIAL_RECORDS = 256;
/** A slot's packed array grows by doubling from this many streams. */
const INITIAL_PER_SLOT = 16;
/** A stream's figures in its slot's packed array: its gaps (N − 1), first token's time, work done then, work mark. */
const PACKED = 4;
const GAPS = 0;
const FIRST_AT = 1;
const FIRST_DONE = 2;
const WORK_MARK = 3;
/** A handle is generation × RECORD_SPACE + index: 2^24 records, and 2^29 generations per record within 2^53. */
const RECORD_SPACE = 0x1000000;
const GENERATIONS = 0x20000000;

/** What harm() reads of a replica (filled by GpuTimeModel.predict; reused, no allocation). */
export class SlackQuery {
  nowMs = 0;
  /** Decode step per token of the batch once the request joins, ms. */
  stepMs = 0;
  /** The TPOT each stream is held to, ms. */
  targetMs = 0;
  /** Prefill rate (equivalent tokens per ms) and prefill tokens per step (token budget − batch). */
  rate = 1;
  chunk = 1;
  /** The replica's queued prefill work (the fluid), its cumulative dispatched work and work prefilled so far. */
  backlog = 0;
  dispatched = 0;
  done = 0;
  /** The request's own prefill work. */
  own = 0;

  set(nowMs: number, stepMs: number, targetMs: number, rate: number, chunk: number, backlog: number, dispatched: number, done: number, own: number): void {
    this.nowMs = nowMs;
    this.stepMs = stepMs;
    this.targetMs = targetMs;
    this.rate = rate;
    this.chunk = chunk;
    this.backlog = backlog;
    this.dispatched = dispatched;
    this.done = done;
    this.own = own;
  }
}

export class StreamSlack {
  /** Per slot, its streams' figures (PACKED each, the first count[slot] of them, in no meaningful order). */
  private readonly packed: Float64Array[];
  /** Per slot, the record at each packed position. */
  private readonly idAt: Int32Array[];
  private readonly count: Int32Array;
  /** Per record: its slot (-1 when free), its packed position, the free list's link. */
  private slotOf = new Int32Array(INITIAL_RECORDS);
  private posOf = new Int32Array(INITIAL_RECORDS);
  private nextFree = new Int32Array(INITIAL_RECORDS);
  /** Each record's generation: bumped whenever it is freed, so older handles to it go stale. */
  private gen = new Int32Array(INITIAL_RECORDS);
  /** Each record's reply forecast (null: N is max_tokens, never revised). */
  private readonly replies: Array<SlackReply | null> = [];
  private free = -1;
  private used = 0;

  constructor(slots: number) {
    this.packed = Array.from({ length: slots }, () => new Float64Array(INITIAL_PER_SLOT * PACKED));
    this.idAt = Array.from({ length: slots }, () => new Int32Array(INITIAL_PER_SLOT));
    this.count = new Int32Array(slots);
  }

  /**
   * A request of `tokens` output tokens (its forecast's N, or max_tokens) was sent to `slot`; `workMark`: the
   * slot's dispatched work just after it; `reply`: its forecast, to revise N once the stream runs past it.
   * Returns its handle (≥ 0), valid until the request is removed or its slot reset.
   */
  add(slot: number, tokens: number, workMark: number, reply: SlackReply | null = null): number {
    let id = this.free;
    if (id >= 0) this.free = this.nextFree[id]!;
    else {
      if (this.used === this.slotOf.length) this.grow();
      id = this.used++;
    }
    const k = this.count[slot]!;
    if (k === this.idAt[slot]!.length) this.growSlot(slot);
    const a = this.packed[slot]!;
    const o = k * PACKED;
    a[o + GAPS] = tokens - 1;
    a[o + FIRST_AT] = Number.NaN;
    a[o + FIRST_DONE] = 0;
    a[o + WORK_MARK] = workMark;
    this.idAt[slot]![k] = id;
    this.count[slot] = k + 1;
    this.slotOf[id] = slot;
    this.posOf[id] = k;
    this.replies[id] = reply;
    return this.gen[id]! * RECORD_SPACE + id;
  }

  /** The record a handle names while it is current; -1 for -1, a removed stream or one its slot's reset dropped. */
  private recordOf(handle: number): number {
    if (!(handle >= 0)) return -1;
    const id = handle % RECORD_SPACE;
    if (id >= this.used || this.slotOf[id]! < 0 || (handle - id) / RECORD_SPACE !== this.gen[id]!) return -1;
    return id;
  }

  /** Whether the handle still names a stream in flight (not removed, its slot not reset since it was added). */
  holds(handle: number): boolean {
    return this.recordOf(handle) >= 0;
  }

  /** Its first token came at `nowMs`, the slot having prefilled `doneWork` so far. A stale handle does nothing. */
  first(handle: number, nowMs: number, doneWork: number): void {
    const id = this.recordOf(handle);
    if (id < 0) return;
    const a = this.packed[this.slotOf[id]!]!;
    const o = this.posOf[id]! * PACKED;
    a[o + FIRST_AT] = nowMs;
    a[o + FIRST_DONE] = doneWork;
  }

  /** The request ended (or was abandoned). False when the handle was stale (nothing removed). */
  remove(handle: number): boolean {
    const id = this.recordOf(handle);
    if (id < 0) return false;
    this.unlink(id);
    return true;
  }

  /** Frees the record; the slot's last stream moves into its packed position. */
  private unlink(id: number): void {
    const slot = this.slotOf[id]!;
    const p = this.posOf[id]!;
    const last = this.count[slot]! - 1;
    if (p !== last) {
      const a = this.packed[slot]!;
      a.copyWithin(p * PACKED, last * PACKED, last * PACKED + PACKED);
      const moved = this.idAt[slot]![last]!;
      this.idAt[slot]![p] = moved;
      this.posOf[moved] = p;
    }
    this.count[slot] = last;
    this.slotOf[id] = -1;
    this.replies[id] = null;
    this.gen[id] = (this.gen[id]! + 1) % GENERATIONS;
    this.nextFree[id] = this.free;
    this.free = id;
  }

  /** The replica restarted or left: its streams are gone, and the handles their requests hold go stale. */
  reset(slot: number): void {
    while (this.count[slot]! > 0) this.unlink(this.idAt[slot]![this.count[slot]! - 1]!);
  }

  /**
   * After harm(): when the last stream it harms would end with no new work sent there, ms from now (0 when it
   * harms none): its tokens left at the step, the stall of the queue ahead, and a stream still prefilling
   * waits for the work before it first. What admission waits for before the request fits.
   */
  clearMs = 0;
  /**
   * After harm(): when the last of the slot's streams would end with no new work sent there, ms from now (0
   * with none): when the replica goes idle as far as this gateway's own requests go, which admission's
   * Retry-After may promise (an idle replica is never refused). Each stream counts at its forecast N (its
   * max_tokens without one), so with forecasts it is an estimate: early where streams run past theirs.
   */
  idleMs = 0;

  /** How many streams on `slot` the request's prefill would push past q.targetMs (see the header). */
  harm(slot: number, q: SlackQuery): number {
    // The query's figures in locals: the rare slackAfter() call would otherwise make the loop reload them.
    const rate = q.rate;
    const stepMs = q.stepMs;
    const nowMs = q.nowMs;
    const backlog = q.backlog;
    const dispatched = q.dispatched;
    const done = q.done;
    const targetMs = q.targetMs;
    const chunkMs = q.chunk / rate;
    const aheadMs = backlog / rate;
    const ownMs = q.own / rate;
    const a = this.packed[slot]!;
    const end = this.count[slot]! * PACKED;
    let count = 0;
    let clear = 0;
    let idle = 0;
    for (let o = 0; o < end; o += PACKED) {
      let gaps = a[o + GAPS]!;
      const first = a[o + FIRST_AT]!;
      // One token (and no forecast to revise it once it streams on): it ends at its first, once the work up to
      // and including its own is prefilled.
      if (gaps < 1 && (Number.isNaN(first) || this.replies[this.idAt[slot]![o / PACKED]!] == null)) {
        if (Number.isNaN(first)) {
          const after = dispatched - a[o + WORK_MARK]!;
          const doneAt = (backlog - (after > 0 ? after : 0)) / rate;
          if (doneAt > idle) idle = doneAt;
        }
        continue;
      }
      let doneMs = 0;
      let left = gaps;
      let beforeMs = aheadMs;
      let startMs = 0;
      if (Number.isNaN(first)) {
        const after = dispatched - a[o + WORK_MARK]!;
        const afterMs = (after > 0 ? after : 0) / rate;
        if (afterMs < beforeMs) {
          startMs = beforeMs - afterMs;
          beforeMs = afterMs;
        }
      } else {
        doneMs = (done - a[o + FIRST_DONE]!) / rate;
        if (doneMs < 0) doneMs = 0;
        const ran = (nowMs - first - doneMs) / stepMs;
        left = gaps - ran;
        if (left <= 0) {
          // Still streaming past its forecast: its N given the ~ran + 1 tokens produced (once per crossing).
          const reply = this.replies[this.idAt[slot]![o / PACKED]!];
          if (reply == null) continue;
          const n = reply.slackAfter(ran + 1);
          if (!(n - 1 > gaps)) continue;
          gaps = a[o + GAPS] = n - 1;
          left = gaps - ran;
          if (left <= 0) continue;
        }
      }
      const slack = gaps * (targetMs - stepMs) - doneMs;
      const cap = left * chunkMs;
      const before = beforeMs < cap ? beforeMs : cap;
      const withOwn = beforeMs + ownMs < cap ? beforeMs + ownMs : cap;
      const endMs = startMs + left * stepMs + before;
      if (endMs > idle) idle = endMs;
      if (before <= slack && withOwn > slack) {
        count++;
        if (endMs > clear) clear = endMs;
      }
    }
    this.clearMs = clear;
    this.idleMs = idle;
    return count;
  }

  private grow(): void {
    const n = this.slotOf.length * 2;
    if (n > RECORD_SPACE) throw new Error(`stream-slack: more than ${RECORD_SPACE} streams in flight`);
    const i32 = (a: Int32Array): Int32Array<ArrayBuffer> => {
      const b = new Int32Array(n);
      b.set(a);
      return b;
    };
    this.slotOf = i32(this.slotOf);
    this.posOf = i32(this.posOf);
    this.nextFree = i32(this.nextFree);
    this.gen = i32(this.gen);
  }

  /** Doubles a slot's packed arrays (a slot's streams only ever grow by one at a time). */
  private growSlot(slot: number): void {
    const ids = new Int32Array(this.idAt[slot]!.length * 2);
    ids.set(this.idAt[slot]!);
    this.idAt[slot] = ids;
    const a = new Float64Array(ids.length * PACKED);
    a.set(this.packed[slot]!);
    this.packed[slot] = a;
  }
}
