// Reply lengths as a decaying histogram: one row of BUCKETS weights per context cell, inside a Float64Array
// a pool's table owns. Buckets are exact up to 16 tokens (one per length) and a quarter octave wide above
// (19 % wide: 17-19, 19-22, …, up to 131,072 and one overflow bucket), so a cell is 69 numbers whatever the
// lengths, and a quantile read from it is within a bucket's width of the sample's. Within a bucket the weight
// is spread evenly over its span (linear interpolation).
// Each sample multiplies its row by FORGET first: the row is a sum over the cell's last ~1 / (1 − FORGET)
// samples, older ones fading, so a cell follows a change in its traffic after about that many of its own
// finished streams, and a quiet cell keeps what it learned.
// Reads take a floor `above` (the stream has produced that many tokens already: the distribution given
// L > above) and a cap (max_tokens: what is read is min(L, cap)). Both are one pass over the row.
// Thread: the acceptor. add() is BUCKETS multiplications (at a stream's end); reads are one pass, no allocation.

/** Samples a cell remembers: the weight of the sample FORGET^k after k more; ~200, the decode fit's memory. Not tuned. */
export const FORGET = 1 - 1 / 200;
/** Lengths below this get a bucket each. */
const EXACT = 16;
/** Buckets per octave above EXACT. */
const PER_OCTAVE = 4;
/** The last regular edge; longer replies share the overflow bucket up to twice it. */
const LONGEST = 131_072;
export const BUCKETS = EXACT + 1 + Math.round(PER_OCTAVE * Math.log2(LONGEST / EXACT));

/** Lower edges of the buckets, plus the overflow bucket's upper edge: bucket b spans [EDGES[b], EDGES[b + 1]). */
export const EDGES: Float64Array = (() => {
  const e = new Float64Array(BUCKETS + 1);
  for (let b = 0; b <= EXACT; b++) e[b] = b + 1;
  for (let b = EXACT + 1; b < BUCKETS; b++) e[b] = EXACT * 2 ** ((b - EXACT) / PER_OCTAVE);
  e[BUCKETS] = 2 * LONGEST;
  return e;
})();

/** The bucket of a reply of `tokens` (at least one token counts as one). */
export function bucketOf(tokens: number): number {
  if (tokens < EXACT + 1) return tokens < 1 ? 0 : Math.floor(tokens) - 1;
  const b = EXACT + Math.floor(PER_OCTAVE * Math.log2(tokens / EXACT));
  return b < BUCKETS ? b : BUCKETS - 1;
}

/** Adds one sample to the row at `base` (its total at `totals[cell]`), the row's weights fading first. */
export function addSample(w: Float64Array, base: number, totals: Float64Array, cell: number, bucket: number, weight = 1): void {
  for (let b = 0; b < BUCKETS; b++) w[base + b]! *= FORGET;
  w[base + bucket]! += weight;
  totals[cell] = totals[cell]! * FORGET + weight;
}

/** Weight of the row's part in bucket b above x (x inside or below the bucket). */
function weightAbove(w: Float64Array, base: number, b: number, x: number): number {
  const lo = EDGES[b]!;
  const wb = w[base + b]!;
  if (x <= lo) return wb;
  const hi = EDGES[b + 1]!;
  return x >= hi ? 0 : (wb * (hi - x)) / (hi - lo);
}

/** Σ of the row's weights above `above`. */
export function massAbove(w: Float64Array, base: number, above: number): number {
  let m = 0;
  for (let b = bucketOf(above); b < BUCKETS; b++) m += weightAbove(w, base, b, above);
  return m;
}

/**
 * The q-quantile of min(L, cap) given L > above; NaN when the row holds no weight above `above`. The result is
 * more than `above` (by at least one token) and at most `cap`.
 */
export function quantileAbove(w: Float64Array, base: number, q: number, above: number, cap: number): number {
  const start = bucketOf(above);
  let tail = 0;
  for (let b = start; b < BUCKETS; b++) tail += weightAbove(w, base, b, above);
  if (!(tail > 0)) return Number.NaN;
  let need = q * tail;
  let x = Number.NaN;
  for (let b = start; b < BUCKETS; b++) {
    const m = weightAbove(w, base, b, above);
    if (m >= need && m > 0) {
      const hi = EDGES[b + 1]!;
      const lo = above > EDGES[b]! ? above : EDGES[b]!;
      x = lo + ((hi - lo) * need) / m;
      break;
    }
    need -= m;
  }
  if (Number.isNaN(x)) x = EDGES[BUCKETS]!;
  if (x < above + 1) x = above + 1;
  return x < cap ? x : cap;
}

/** E[min(L, cap) | L > above]; NaN when the row holds no weight above `above`. */
export function meanAbove(w: Float64Array, base: number, above: number, cap: number): number {
  let tail = 0;
  let sum = 0;
  for (let b = bucketOf(above); b < BUCKETS; b++) {
    const m = weightAbove(w, base, b, above);
    if (m <= 0) continue;
    const hi = EDGES[b + 1]!;
    const lo = above > EDGES[b]! ? above : EDGES[b]!;
    tail += m;
    // The bucket's weight is even over [lo, hi): the part above the cap counts at the cap.
    if (cap >= hi) sum += (m * (lo + hi)) / 2;
    else if (cap <= lo) sum += m * cap;
    else {
      const under = (cap - lo) / (hi - lo);
      sum += m * (under * (lo + cap) / 2 + (1 - under) * cap);
    }
  }
  if (!(tail > 0)) return Number.NaN;
  const x = sum / tail;
  return x > above + 1 ? x : above + 1 < cap ? above + 1 : cap;
}
