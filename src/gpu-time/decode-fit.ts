// Each replica's decode step, learned online: step ≈ base + perSeq × batch + perKv × KV tokens, fitted by
// exponentially forgetting least squares pulled toward the pool's nominal figures (a ridge prior worth
// PRIOR_WEIGHT_* samples), with Huber weights: a sample whose residual passes HUBER_K × the running mean
// absolute residual counts only as much as one at that bound. A replica perturbed from its profile converges
// to its own figures once its batches have varied; while they have not, the prior holds the coefficients the
// data cannot separate. Features are scaled (batch / 64, KV / 100k tokens) so one prior weight suits all three.
// Thread: the acceptor. Hot path: stepMs is three multiply-adds; observe() solves one 3 × 3 system.
import { BATCH_UNIT, KV_UNIT_TOKENS, type PoolFigures } from './pool-figures.ts';

/** Forgetting factor per sample: the fit's memory is ~1 / (1 − FORGET) = 200 samples (about a minute of one
 * replica's streams at capacity), enough to separate the slopes under ±10 % step noise. */
export const FORGET = 0.995;
/** The nominal figures count as this many samples at unit features: little for the fixed part of the step (a
 * slower replica is first of all slower per step), more for the slopes, which only varied batches identify. */
export const PRIOR_WEIGHT_BASE = 1;
export const PRIOR_WEIGHT_SLOPE = 5;
/** Residuals beyond this many mean absolute residuals are down-weighted (Huber). */
export const HUBER_K = 2.5;
/** Mean absolute residual's floor, as a share of the predicted step: noise below this is not treated as an outlier. */
const MIN_SCALE_SHARE = 0.05;

const S = 10; // per slot: A (6: 00 01 02 11 12 22), b (3), mean |residual| (1)

export class DecodeFit {
  /** Per slot θ = [base ms, ms per BATCH_UNIT sequences, ms per KV_UNIT_TOKENS]; NaN base = nominal. */
  private readonly theta: Float64Array;
  private readonly prior: Float64Array;
  private readonly sums: Float64Array;
  private readonly count: Int32Array;

  constructor(slots: number) {
    this.theta = new Float64Array(slots * 3).fill(Number.NaN);
    this.prior = new Float64Array(slots * 3);
    this.sums = new Float64Array(slots * S);
    this.count = new Int32Array(slots);
  }

  /** The slot's decode step (ms) with `batch` sequences reading `kvTokens`; the pool's figures until it learns. */
  stepMs(slot: number, fig: PoolFigures, batch: number, kvTokens: number): number {
    const o = slot * 3;
    const b = this.theta[o]!;
    if (Number.isNaN(b)) return fig.stepMs(batch, kvTokens);
    return b + (this.theta[o + 1]! * batch) / BATCH_UNIT + (this.theta[o + 2]! * kvTokens) / KV_UNIT_TOKENS;
  }

  baseMs(slot: number, fig: PoolFigures): number {
    const b = this.theta[slot * 3]!;
    return Number.isNaN(b) ? fig.baseMs : b;
  }

  perSeqMs(slot: number, fig: PoolFigures): number {
    const b = this.theta[slot * 3]!;
    return Number.isNaN(b) ? fig.perSeqMs : this.theta[slot * 3 + 1]! / BATCH_UNIT;
  }

  perKvTokenMs(slot: number, fig: PoolFigures): number {
    const b = this.theta[slot * 3]!;
    return Number.isNaN(b) ? fig.perKvTokenMs : this.theta[slot * 3 + 2]! / KV_UNIT_TOKENS;
  }

  samples(slot: number): number {
    return this.count[slot]!;
  }

  /** One decode step of `stepMs` observed at mean `batch` and `kvTokens`. */
  observe(slot: number, fig: PoolFigures, batch: number, kvTokens: number, stepMs: number): void {
    if (!(stepMs > 0) || !(batch >= 1)) return;
    const o = slot * 3;
    const p = this.prior;
    if (Number.isNaN(this.theta[o]!)) {
      p[o] = fig.baseMs;
      p[o + 1] = fig.perSeqMs * BATCH_UNIT;
      p[o + 2] = fig.perKvTokenMs * KV_UNIT_TOKENS;
      this.theta[o] = p[o]!;
      this.theta[o + 1] = p[o + 1]!;
      this.theta[o + 2] = p[o + 2]!;
      this.sums.fill(0, slot * S, slot * S + S);
    }
    const x1 = batch / BATCH_UNIT;
    const x2 = kvTokens / KV_UNIT_TOKENS;
    const s = this.sums;
    const q = slot * S;
    const predicted = this.theta[o]! + this.theta[o + 1]! * x1 + this.theta[o + 2]! * x2;
    const resid = stepMs - predicted;
    const absR = resid < 0 ? -resid : resid;
    // Of the prediction, not the sample: an outlier must not widen its own bound.
    const floor = MIN_SCALE_SHARE * predicted;
    const scale = (s[q + 9]! > floor ? s[q + 9]! : floor) * HUBER_K;
    const w = this.count[slot]! > 3 && absR > scale ? scale / absR : 1;
    // The scale learns from clipped residuals, so outliers cannot inflate the bound that tames them.
    const clipped = absR < scale ? absR : scale;
    s[q + 9] = this.count[slot]! === 0 ? absR : s[q + 9]! + 0.1 * (clipped - s[q + 9]!);
    const f = FORGET;
    s[q] = f * s[q]! + w;
    s[q + 1] = f * s[q + 1]! + w * x1;
    s[q + 2] = f * s[q + 2]! + w * x2;
    s[q + 3] = f * s[q + 3]! + w * x1 * x1;
    s[q + 4] = f * s[q + 4]! + w * x1 * x2;
    s[q + 5] = f * s[q + 5]! + w * x2 * x2;
    s[q + 6] = f * s[q + 6]! + w * stepMs;
    s[q + 7] = f * s[q + 7]! + w * x1 * stepMs;
    s[q + 8] = f * s[q + 8]! + w * x2 * stepMs;
    this.count[slot]!++;
    this.solve(slot);
  }

  reset(slot: number): void {
    this.theta[slot * 3] = Number.NaN;
    this.count[slot] = 0;
  }

  /** (A + λI) θ = b + λ θ₀ by Cramer's rule; a singular system (cannot happen with λ > 0) keeps θ. */
  private solve(slot: number): void {
    const s = this.sums;
    const q = slot * S;
    const o = slot * 3;
    const p = this.prior;
    const l0 = PRIOR_WEIGHT_BASE;
    const l = PRIOR_WEIGHT_SLOPE;
    const a00 = s[q]! + l0, a01 = s[q + 1]!, a02 = s[q + 2]!;
    const a11 = s[q + 3]! + l, a12 = s[q + 4]!, a22 = s[q + 5]! + l;
    const b0 = s[q + 6]! + l0 * p[o]!, b1 = s[q + 7]! + l * p[o + 1]!, b2 = s[q + 8]! + l * p[o + 2]!;
    const c00 = a11 * a22 - a12 * a12;
    const c01 = a02 * a12 - a01 * a22;
    const c02 = a01 * a12 - a02 * a11;
    const det = a00 * c00 + a01 * c01 + a02 * c02;
    if (!(Math.abs(det) > 1e-12)) return;
    const c11 = a00 * a22 - a02 * a02;
    const c12 = a01 * a02 - a00 * a12;
    const c22 = a00 * a11 - a01 * a01;
    this.theta[o] = (c00 * b0 + c01 * b1 + c02 * b2) / det;
    this.theta[o + 1] = (c01 * b0 + c11 * b1 + c12 * b2) / det;
    this.theta[o + 2] = (c02 * b0 + c12 * b1 + c22 * b2) / det;
  }
}
