// How fast a pool frees KV tokens, learned from the requests that end there: an exponentially weighted rate
// (time constant `windowMs`) of released reservation tokens per millisecond of busy time. Busy time only:
// while nothing this gateway admitted is in flight the pool frees nothing because nothing runs, and counting
// idle time would make the first burst after a quiet spell look hopeless. Both the token sum and the time
// sum decay with the same kernel, so for spans shorter than the window the estimate is tokens / busy time,
// and for longer ones the older half-life's worth fades out.
// Until enough busy time has been seen (MIN_BUSY_MS) the caller uses its own fallback (decode throughput).
// Thread: the acceptor. Hot path: one Math.exp per observation and per read.

/** Busy time below which one completion says too little about a rate (its owner falls back). */
export const MIN_BUSY_MS = 200;
export const DEFAULT_DRAIN_WINDOW_MS = 5000;

export class DrainRate {
  private readonly windowMs: number;
  /** Decayed sum of released tokens. */
  private tokens = 0;
  /** Decayed sum of busy milliseconds (∫ of the kernel over the busy time seen). */
  private busyMs = 0;
  private lastMs = 0;
  private busy = false;

  constructor(windowMs = DEFAULT_DRAIN_WINDOW_MS) {
    this.windowMs = windowMs;
  }

  /** The pool became busy (something in flight) or idle, at `nowMs`. */
  setBusy(nowMs: number, busy: boolean): void {
    this.advance(nowMs);
    this.busy = busy;
  }

  /** A request ended and released `tokens` of reservation at `nowMs`. */
  observe(nowMs: number, tokens: number): void {
    this.advance(nowMs);
    if (tokens > 0) this.tokens += tokens;
  }

  /** Tokens per second freed while busy; NaN while too little has been seen to tell. */
  tokensPerSecond(nowMs: number): number {
    this.advance(nowMs);
    if (this.tokens <= 0 || this.busyMs < MIN_BUSY_MS) return Number.NaN;
    return (this.tokens / this.busyMs) * 1000;
  }

  private advance(nowMs: number): void {
    const dt = nowMs - this.lastMs;
    this.lastMs = nowMs;
    if (!this.busy || dt <= 0) return;
    const decay = Math.exp(-dt / this.windowMs);
    this.tokens *= decay;
    this.busyMs = this.busyMs * decay + this.windowMs * (1 - decay);
  }
}
