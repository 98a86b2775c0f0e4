// Each replica's prefill rate (equivalent tokens per ms), learned from first tokens: a sample is the prefill
// work a request had ahead of it at dispatch (its own included) over the part of its TTFT that was not the
// decode steps it rode in. The estimate is the median of the last WINDOW samples, each first clamped to
// [1/CLAMP, CLAMP] × the estimate before it: one stalled or instant reply cannot move it, and ±10 % step
// jitter averages out within a window. Until the window is full the pool's nominal rate stands in for the
// samples it lacks (a prior worth the empty slots, fading as samples come): a replica's first sample alone
// cannot set its rate. That first one is the least trustworthy: a fresh replica's first request is slowed by
// its own warm-up and the gateway's, and a rate learned from it (a fifth low, live) made every prediction
// there a fifth high until eight more came. A replica truly slower is followed from its fifth sample on.
// Until a replica has a sample (and after it restarts) the nominal rate is used as is.
// Thread: the acceptor. Hot path: rate() is one array read; observe() sorts 9 numbers.

/** Samples the median is taken over (odd: the median is one of them). */
export const RATE_WINDOW = 9;
/** A sample is clamped to within this factor of the current estimate. */
export const RATE_CLAMP = 2;

export class PrefillRates {
  private readonly est: Float64Array;
  private readonly ring: Float64Array;
  private readonly count: Int32Array;
  private readonly scratch = new Float64Array(RATE_WINDOW);

  constructor(slots: number) {
    this.est = new Float64Array(slots).fill(Number.NaN);
    this.ring = new Float64Array(slots * RATE_WINDOW);
    this.count = new Int32Array(slots);
  }

  /** Tokens per ms; `nominal` until the slot has a sample. */
  rate(slot: number, nominal: number): number {
    const r = this.est[slot]!;
    return Number.isNaN(r) ? nominal : r;
  }

  samples(slot: number): number {
    return this.count[slot]!;
  }

  observe(slot: number, workTokens: number, prefillMs: number, nominal: number): void {
    if (!(workTokens > 0) || !(prefillMs > 0)) return;
    const current = this.rate(slot, nominal);
    let s = workTokens / prefillMs;
    if (s > RATE_CLAMP * current) s = RATE_CLAMP * current;
    else if (s < current / RATE_CLAMP) s = current / RATE_CLAMP;
    const n = this.count[slot]!;
    this.ring[slot * RATE_WINDOW + (n % RATE_WINDOW)] = s;
    this.count[slot] = n + 1;
    const k = n + 1 < RATE_WINDOW ? n + 1 : RATE_WINDOW;
    const a = this.scratch;
    for (let i = 0; i < RATE_WINDOW; i++) {
      // Insertion sort into the scratch: the k samples, then the prior in the slots they do not fill yet.
      const v = i < k ? this.ring[slot * RATE_WINDOW + i]! : nominal;
      let j = i;
      while (j > 0 && a[j - 1]! > v) {
        a[j] = a[j - 1]!;
        j--;
      }
      a[j] = v;
    }
    this.est[slot] = a[RATE_WINDOW >> 1]!;
  }

  reset(slot: number): void {
    this.est[slot] = Number.NaN;
    this.count[slot] = 0;
  }
}
