// One pool's reply lengths, learned from its finished streams: decaying histograms (reply-histogram.ts) per
// context cell, at four levels from coarse to fine:
//   0  the pool                                  (starts with the pool's prior: typical_reply_tokens)
//   1  × route (chat, completions, responses) × max_tokens (none sent, ≤128, ≤512, ≤2,048, ≤8,192, more)
//   2  × tenant (8 buckets by a hash of its name)
//   3  × prompt length (<128, <512, <2,048, <8,192, <32,768, more)
// A finished stream is added to its cell at every level; a forecast reads the finest cell holding at least
// MIN_CELL_WEIGHT samples (coarser ones back it off: a new tenant starts from its route's lengths, a new pool
// from its prior). max_tokens is context and an upper bound, never a length: every figure is min(L, cap).
// Quantiles (why each: src/gpu-time/README.md, "Reply lengths"): KV at KV_QUANTILE (a reply past its
// reservation holds KV nobody budgeted: one-sided), the per-stream rule at SLACK_QUANTILE (slack counted for
// tokens a stream will not produce lets a request push it past its TPOT; too little sheds what it could
// take), the ledger's work at the mean (a sum over a replica's streams).
// Memory: 1,027 cells × 69 buckets of Float64 (0.57 MB) per pool and gateway thread.
// Thread: the acceptor. forecast() is four passes over one row (~300 flops), observe() 4 × 69 multiplications.
import { addSample, BUCKETS, bucketOf, EDGES, massAbove, meanAbove, quantileAbove } from './reply-histogram.ts';
import type { ReplyForecast, ReplyReader } from './reply-forecast.ts';

/** Context buckets. */
export const ROUTES = 3;
const CAPS = 6;
export const TENANTS = 8;
const PROMPTS = 6;
const L1 = 1;
const L2 = L1 + ROUTES * CAPS;
const L3 = L2 + ROUTES * CAPS * TENANTS;
export const CELLS = L3 + ROUTES * CAPS * TENANTS * PROMPTS;

/** A cell is read once it holds this many samples (decayed weight); below, the next coarser one. Not tuned. */
export const MIN_CELL_WEIGHT = 24;
/** A revision reads a cell only if this much of its weight lies above what the stream has produced. */
const MIN_TAIL_WEIGHT = 4;
/** The prior: a log-normal around the pool's typical reply, σ = 1 in ln (×2.7 either way), worth this many samples. */
const PRIOR_WEIGHT = 4;
const PRIOR_SIGMA = 1;
/**
 * Quantile of the KV figure. Not swept: at the loads the race probes KV is not what runs out (scraped KV use
 * 0.2-0.3 % on the Azure code trace at 30-46 requests/s, seed 1), and 0.9 kept preemptions at 0 in every
 * tuning run (seed mix seed 2, Mooncake seed 3, Azure seed 1; native-bench/sim/README.md, "Reply lengths").
 */
export const KV_QUANTILE = 0.9;
/**
 * Quantile of the per-stream rule's N. Tuned on the race's settings (caps, engine bias 20, error 3, jitter 10,
 * KV events, 2 simulated minutes), kv-aware under Expediter's admission, share of requests within their SLO at
 * 0.5 / 0.3 / 0.15: Azure code trace seed 1, speed 10 (29.8 rps): 90.2 / 91.1 / 91.1 %, speed 14 (46.0 rps):
 * 87.9 / 88.6 / 88.7 % (admitted within SLO 97.1 → 98.7 %); seed mix seed 2, 279 and 424 rps: 98.4 / 98.3 %
 * and 85.5 / 85.6 %; Mooncake seed 3, speed 5 and 7: 95.1 / 96.8 % and 90.1 / 89.9 %. A stream shorter than
 * its N had less slack than counted; below 0.3 nothing more is gained. None of these seeds is a race default.
 */
export const SLACK_QUANTILE = 0.3;

export function capBucket(cap: number, sent: boolean): number {
  if (!sent) return 0;
  return cap <= 128 ? 1 : cap <= 512 ? 2 : cap <= 2048 ? 3 : cap <= 8192 ? 4 : 5;
}

export function promptBucket(tokens: number): number {
  return tokens < 128 ? 0 : tokens < 512 ? 1 : tokens < 2048 ? 2 : tokens < 8192 ? 3 : tokens < 32768 ? 4 : 5;
}

export class ReplyTable implements ReplyReader {
  readonly poolId: string;
  readonly kvQuantile: number;
  readonly slackQuantile: number;
  private readonly w = new Float64Array(CELLS * BUCKETS);
  private readonly totals = new Float64Array(CELLS);
  /** The median forecast's absolute error over the last 256 finished streams, in shares of their length (a ring). */
  readonly errors = new Float64Array(256);
  errorCount = 0;

  constructor(poolId: string, typicalTokens: number, kvQuantile = KV_QUANTILE, slackQuantile = SLACK_QUANTILE) {
    this.poolId = poolId;
    this.kvQuantile = kvQuantile;
    this.slackQuantile = slackQuantile;
    this.setPrior(typicalTokens);
  }

  /** Replaces the pool cell's prior (weight PRIOR_WEIGHT in all, spread log-normally over the buckets). */
  setPrior(typicalTokens: number): void {
    const mu = Math.log(typicalTokens > 1 ? typicalTokens : 1);
    let sum = 0;
    for (let b = 0; b < BUCKETS; b++) {
      // The density of ln L at the bucket's middle, times its width in ln L.
      const lo = EDGES[b]!;
      const hi = EDGES[b + 1]!;
      const z = (Math.log((lo + hi) / 2) - mu) / PRIOR_SIGMA;
      const v = Math.exp(-0.5 * z * z) * Math.log(hi / lo);
      this.w[b] = v;
      sum += v;
    }
    for (let b = 0; b < BUCKETS; b++) this.w[b] = (this.w[b]! * PRIOR_WEIGHT) / sum;
    this.totals[0] = PRIOR_WEIGHT;
  }

  /** Fills `out` for a request of this context. `cap` is max_tokens (per sequence), `capSent` false when the client sent none. */
  forecast(route: number, tenantBucket: number, promptTokens: number, cap: number, capSent: boolean, out: ReplyForecast): ReplyForecast {
    const rc = route * CAPS + capBucket(cap, capSent);
    out.cell1 = L1 + rc;
    out.cell2 = L2 + rc * TENANTS + tenantBucket;
    out.cell3 = L3 + (rc * TENANTS + tenantBucket) * PROMPTS + promptBucket(promptTokens);
    let level = 3;
    while (level > 0 && this.totals[out.cellAt(level)]! < MIN_CELL_WEIGHT) level--;
    out.table = this;
    out.level = level;
    out.cap = cap > 1 ? cap : 1;
    const base = out.cellAt(level) * BUCKETS;
    const w = this.w;
    out.medianTokens = quantileAbove(w, base, 0.5, 0, out.cap);
    out.kvTokens = quantileAbove(w, base, this.kvQuantile, 0, out.cap);
    out.slackTokens = quantileAbove(w, base, this.slackQuantile, 0, out.cap);
    out.meanTokens = meanAbove(w, base, 0, out.cap);
    return out;
  }

  /** A stream of this forecast finished with `tokens` (per sequence): learned at every level; the error recorded. */
  observe(f: ReplyForecast, tokens: number): void {
    const b = bucketOf(tokens);
    for (let l = 0; l < 4; l++) {
      const cell = f.cellAt(l);
      addSample(this.w, cell * BUCKETS, this.totals, cell, b);
    }
    const len = tokens > 1 ? tokens : 1;
    const err = Math.abs(f.medianTokens - len) / len;
    this.errors[this.errorCount++ % this.errors.length] = err;
  }

  /** The q-quantile given L > produced, from the forecast's cell or the finest coarser one with weight there. */
  quantileAfter(f: ReplyForecast, q: number, produced: number): number {
    for (let l = f.level; l >= 0; l--) {
      const base = f.cellAt(l) * BUCKETS;
      if (massAbove(this.w, base, produced) >= MIN_TAIL_WEIGHT || l === 0) {
        const x = quantileAbove(this.w, base, q, produced, f.cap);
        if (!Number.isNaN(x)) return x;
      }
    }
    return beyondSeen(produced, f.cap);
  }

  /** E[min(L, cap) | L > produced], as quantileAfter picks its cell. */
  meanAfter(f: ReplyForecast, produced: number): number {
    for (let l = f.level; l >= 0; l--) {
      const base = f.cellAt(l) * BUCKETS;
      if (massAbove(this.w, base, produced) >= MIN_TAIL_WEIGHT || l === 0) {
        const x = meanAbove(this.w, base, produced, f.cap);
        if (!Number.isNaN(x)) return x;
      }
    }
    return beyondSeen(produced, f.cap);
  }

  /** Samples in the cell (decayed), for tests and the README's figures. */
  weight(cell: number): number {
    return this.totals[cell]!;
  }
}

/** Longer than anything the pool has seen finish: as long again as it has run (capped). */
function beyondSeen(produced: number, cap: number): number {
  const x = 2 * produced + 1;
  return x < cap ? x : cap;
}
