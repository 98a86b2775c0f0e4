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
// after it (FCFS). Live, max_tokens is an upper bound on N: a stream that stops early had less slack than
// counted, so the count is a lower bound there (in the simulator max_tokens is the trace's output length).
// Cost: O(streams on the replica) per prediction, no allocation; a record per in-flight request.
// Thread: the acceptor (one per GpuTimeModel).

/** Records in the pool grow by doubling from this. */
const INITIAL_RECORDS = 256;

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
  private head: Int32Array;
  private next = new Int32Array(INITIAL_RECORDS);
  private prev = new Int32Array(INITIAL_RECORDS);
  private slotOf = new Int32Array(INITIAL_RECORDS);
  private gaps = new Float64Array(INITIAL_RECORDS);
  private workMark = new Float64Array(INITIAL_RECORDS);
  private firstAt = new Float64Array(INITIAL_RECORDS);
  private firstDone = new Float64Array(INITIAL_RECORDS);
  private free = -1;
  private used = 0;

  constructor(slots: number) {
    this.head = new Int32Array(slots).fill(-1);
  }

  /** A request of `maxTokens` output tokens was sent to `slot`; `workMark`: the slot's dispatched work just after it. Returns its id. */
  add(slot: number, maxTokens: number, workMark: number): number {
    let id = this.free;
    if (id >= 0) this.free = this.next[id]!;
    else {
      if (this.used === this.next.length) this.grow();
      id = this.used++;
    }
    this.slotOf[id] = slot;
    this.gaps[id] = maxTokens - 1;
    this.workMark[id] = workMark;
    this.firstAt[id] = Number.NaN;
    this.firstDone[id] = 0;
    const h = this.head[slot]!;
    this.next[id] = h;
    this.prev[id] = -1;
    if (h >= 0) this.prev[h] = id;
    this.head[slot] = id;
    return id;
  }

  /** Its first token came at `nowMs`, the slot having prefilled `doneWork` so far. */
  first(id: number, nowMs: number, doneWork: number): void {
    if (id < 0) return;
    this.firstAt[id] = nowMs;
    this.firstDone[id] = doneWork;
  }

  /** The request ended (or was abandoned). */
  remove(id: number): void {
    if (id < 0 || this.slotOf[id]! < 0) return;
    const p = this.prev[id]!;
    const n = this.next[id]!;
    if (p >= 0) this.next[p] = n;
    else this.head[this.slotOf[id]!] = n;
    if (n >= 0) this.prev[n] = p;
    this.slotOf[id] = -1;
    this.next[id] = this.free;
    this.free = id;
  }

  /** The replica restarted or left: its streams are gone. */
  reset(slot: number): void {
    let id = this.head[slot]!;
    while (id >= 0) {
      const n = this.next[id]!;
      this.remove(id);
      id = n;
    }
  }

  /**
   * After harm(): when the last stream it harms would end with no new work sent there, ms from now (0 when it
   * harms none): its tokens left at the step, the stall of the queue ahead, and a stream still prefilling
   * waits for the work before it first. What admission waits for before the request fits.
   */
  clearMs = 0;

  /** How many streams on `slot` the request's prefill would push past q.targetMs (see the header). */
  harm(slot: number, q: SlackQuery): number {
    const chunkMs = q.chunk / q.rate;
    const aheadMs = q.backlog / q.rate;
    const ownMs = q.own / q.rate;
    let count = 0;
    let clear = 0;
    for (let id = this.head[slot]!; id >= 0; id = this.next[id]!) {
      const gaps = this.gaps[id]!;
      if (gaps < 1) continue;
      const first = this.firstAt[id]!;
      let doneMs = 0;
      let left = gaps;
      let beforeMs = aheadMs;
      let startMs = 0;
      if (Number.isNaN(first)) {
        const after = q.dispatched - this.workMark[id]!;
        const afterMs = (after > 0 ? after : 0) / q.rate;
        if (afterMs < beforeMs) {
          startMs = beforeMs - afterMs;
          beforeMs = afterMs;
        }
      } else {
        doneMs = (q.done - this.firstDone[id]!) / q.rate;
        if (doneMs < 0) doneMs = 0;
        left = gaps - (q.nowMs - first - doneMs) / q.stepMs;
        if (left <= 0) continue;
      }
      const slack = gaps * (q.targetMs - q.stepMs) - doneMs;
      const cap = left * chunkMs;
      const before = beforeMs < cap ? beforeMs : cap;
      const withOwn = beforeMs + ownMs < cap ? beforeMs + ownMs : cap;
      if (before <= slack && withOwn > slack) {
        count++;
        const end = startMs + left * q.stepMs + before;
        if (end > clear) clear = end;
      }
    }
    this.clearMs = clear;
    return count;
  }

  private grow(): void {
    const n = this.next.length * 2;
    const i32 = (a: Int32Array): Int32Array<ArrayBuffer> => {
      const b = new Int32Array(n);
      b.set(a);
      return b;
    };
    const f64 = (a: Float64Array): Float64Array<ArrayBuffer> => {
      const b = new Float64Array(n);
      b.set(a);
      return b;
    };
    this.next = i32(this.next);
    this.prev = i32(this.prev);
    this.slotOf = i32(this.slotOf);
    this.gaps = f64(this.gaps);
    this.workMark = f64(this.workMark);
    this.firstAt = f64(this.firstAt);
    this.firstDone = f64(this.firstDone);
  }
}
