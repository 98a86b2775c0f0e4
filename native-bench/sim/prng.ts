// Seeded pseudo-random numbers for the fleet simulator: every draw comes from one of these, never from
// Math.random, so the same flags give the same run byte for byte. sfc32 (Chris Doty-Humphrey's small fast
// chaotic generator, 128-bit state, passes PractRand to terabytes) seeded through splitmix32, plus the
// distributions the workloads draw from. Also the 53-bit chained block hash the workloads key KV blocks with.
// Thread: any (one instance per consumer). Hot path: a few integer ops per draw, no allocation.
import { fmix32 } from '../../src/util/fmix32.ts';

export class Prng {
  private a: number;
  private b: number;
  private c: number;
  private d: number;

  /** `seed` and `stream` together pick the sequence: one stream per consumer keeps consumers independent. */
  constructor(seed: number, stream = 0) {
    let s = (Math.imul(seed | 0, 0x9e3779b1) ^ Math.imul(stream | 0, 0x85ebca6b) ^ 0x6a09e667) >>> 0;
    const next = (): number => {
      s = (s + 0x9e3779b9) >>> 0;
      return fmix32(s ^ (s >>> 15));
    };
    this.a = next();
    this.b = next();
    this.c = next();
    this.d = next();
    for (let i = 0; i < 12; i++) this.u32();
  }

  u32(): number {
    const t = (((this.a + this.b) | 0) + this.d) | 0;
    this.d = (this.d + 1) | 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) | 0;
    this.c = (this.c << 21) | (this.c >>> 11);
    this.c = (this.c + t) | 0;
    return t >>> 0;
  }

  /** Uniform in [0, 1). */
  next(): number {
    return this.u32() / 4294967296;
  }

  /** Uniform integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }

  /** Exponential with the given mean. */
  exp(mean: number): number {
    return -Math.log(1 - this.next()) * mean;
  }

  /** Standard normal (Box-Muller; one of the pair is dropped to keep the state simple). */
  normal(): number {
    const u = 1 - this.next();
    const v = this.next();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
  }

  /** Lognormal whose median is `median` and log-space standard deviation `sigma` (mean = median·e^{σ²/2}). */
  lognormal(median: number, sigma: number): number {
    return median * Math.exp(sigma * this.normal());
  }

  /** Pareto with scale `xm` (minimum) and shape `alpha`. */
  pareto(xm: number, alpha: number): number {
    return xm / Math.pow(1 - this.next(), 1 / alpha);
  }

  /** Geometric on {1, 2, ...} with the given mean (≥ 1). */
  geometric(mean: number): number {
    const p = 1 / mean;
    if (p >= 1) return 1;
    return 1 + Math.floor(Math.log(1 - this.next()) / Math.log(1 - p));
  }
}

/** Zipf weights 1/k^s for k = 1..n, normalised to a cumulative table for pick(). */
export function zipfCumulative(n: number, s: number): Float64Array {
  const cum = new Float64Array(n);
  let total = 0;
  for (let k = 0; k < n; k++) {
    total += 1 / Math.pow(k + 1, s);
    cum[k] = total;
  }
  for (let k = 0; k < n; k++) cum[k] = cum[k]! / total;
  return cum;
}

/** Index drawn from a cumulative table (binary search). */
export function pick(cum: Float64Array, rng: Prng): number {
  const u = rng.next();
  let lo = 0;
  let hi = cum.length - 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (cum[mid]! > u) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/**
 * A 53-bit hash of (parent hash, content key, block index): the workloads' stand-in for hashing a block's
 * tokens. Equal (parent, key, index) give equal hashes, so two prompts share block i's hash exactly when
 * they share its content and every block before it, as the gateway's and vLLM's chained hashes do.
 */
export function chain53(parent: number, key: number, index: number): number {
  const lo = parent >>> 0;
  const hi = Math.floor(parent / 4294967296) >>> 0;
  const a = fmix32(lo ^ Math.imul(key | 0, 0x9e3779b1) ^ Math.imul(index + 0x3c6ef372, 0x85ebca6b));
  const b = fmix32(hi ^ a ^ Math.imul(index + 1, 0x27d4eb2f) ^ Math.imul((key / 4294967296) | 0, 0xc2b2ae35) ^ key);
  return (b & 0x1fffff) * 4294967296 + fmix32(a ^ b ^ 0x5bd1e995);
}
