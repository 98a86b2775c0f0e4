// Each replica's prefill rate (tokens/s), learned online from first-token times: a sample is the prefill work
// that was ahead of a request at dispatch (its own uncached tokens included) over the part of its TTFT
// spent prefilling. Robust to outliers: a sample is clamped to [0.5×, 2×] the current estimate before an
// EWMA (α = 0.2), so one stalled or instant reply moves the estimate by at most 20 % of a doubling.
// Until a replica has samples (and after it restarts) its pool's configured figure is used.
// Thread: the acceptor (per-thread estimates). Hot path: rate() is one array read.

const ALPHA = 0.2;

export class PrefillRateLearner {
  private readonly rates: Float64Array;
  private readonly samples: Int32Array;

  constructor(slots: number) {
    this.rates = new Float64Array(slots).fill(Number.NaN);
    this.samples = new Int32Array(slots);
  }

  rate(slot: number, fallbackTokensPerSecond: number): number {
    const r = this.rates[slot]!;
    return Number.isNaN(r) ? fallbackTokensPerSecond : r;
  }

  /** `workTokens` prefilled in `prefillMs`; `fallback` is the pool's figure, the start of the estimate. */
  observe(slot: number, workTokens: number, prefillMs: number, fallbackTokensPerSecond: number): void {
    if (!(workTokens > 0) || !(prefillMs > 0)) return;
    const current = this.rate(slot, fallbackTokensPerSecond);
    let sample = (workTokens / prefillMs) * 1000;
    if (sample > 2 * current) sample = 2 * current;
    else if (sample < 0.5 * current) sample = 0.5 * current;
    this.rates[slot] = current + ALPHA * (sample - current);
    this.samples[slot]!++;
  }

  sampleCount(slot: number): number {
    return this.samples[slot]!;
  }

  reset(slot: number): void {
    this.rates[slot] = Number.NaN;
    this.samples[slot] = 0;
  }
}
