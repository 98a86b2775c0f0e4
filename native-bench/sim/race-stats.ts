// The race's statistics: the SLO capacity of one policy on one seed found by bracketing then bisecting the
// offered rate, and the mean over seeds with its 95 % Student-t interval.
// Thread: main. Pure functions and one async search; no I/O.

/** Two-sided 95 % quantiles of Student's t, t(0.975; dof) for dof 1..30; past 30 the normal's 1.96 is within 2 %. */
const T975 = [
  12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
  2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
  2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
];

export function studentT975(dof: number): number {
  if (!Number.isInteger(dof) || dof < 1) throw new RangeError(`degrees of freedom must be a positive integer, got ${dof}`);
  return dof <= T975.length ? T975[dof - 1]! : 1.96;
}

export interface MeanInterval {
  mean: number;
  /** mean ± t(0.975; n−1)·s/√n; null with one value (no spread to estimate). */
  ci95: [number, number] | null;
}

export function meanInterval(values: readonly number[]): MeanInterval {
  const n = values.length;
  if (n === 0) throw new RangeError('no values');
  const mean = values.reduce((s, v) => s + v, 0) / n;
  if (n === 1) return { mean, ci95: null };
  const variance = values.reduce((s, v) => s + (v - mean) ** 2, 0) / (n - 1);
  const half = studentT975(n - 1) * Math.sqrt(variance / n);
  return { mean, ci95: [mean - half, mean + half] };
}

export interface BisectOptions {
  /** First rate tried (the computed capacity). */
  start: number;
  /** Bracketing multiplies the rate by this after a pass (and divides by at least this after a fail). */
  step: number;
  /** Stop when the failing rate is within this fraction above the passing one (0.01 = 1 %). */
  tolerance: number;
  /** Bracketing gives up after this many moves in one direction. */
  maxBracketSteps: number;
  /** The attainment a rate must reach to pass (0.9). */
  target: number;
}

export interface BisectResult {
  /** Highest rate that passed and its attainment; null when even the lowest tried failed. */
  lo: number | null;
  loAttainment: number;
  /** Lowest rate that failed and its attainment; null when even the highest tried passed. */
  hi: number | null;
  hiAttainment: number;
  /** Every rate tried, in order. */
  tried: number[];
}

/** A failing probe's next rate is at most this many times lower (its attainment's guess, bounded). */
const MAX_DOWN_FACTOR = 4;
/**
 * A closing probe lands this fraction inside the tolerance: 1 % above the passing end less 0.2 %, so that the
 * rates actually run (rounded to four digits in race.ts) still bracket within the tolerance when it fails.
 */
const CLOSE_MARGIN = 0.002;

/**
 * The highest rate whose attainment reaches the target, assuming attainment falls as the rate rises.
 * Bracket: from `start`, step up by `step` until a fail; after a fail step down by what the attainment
 * suggests (rate × attainment / target: a run past capacity serves about its capacity's worth), at least
 * `step` and at most MAX_DOWN_FACTOR, until a pass. Then narrow the bracket until hi ≤ lo·(1 + tolerance),
 * each probe where the line through the bracket's ends crosses the target (regula falsi), with the Illinois
 * rule: when a side keeps winning, the other end's distance from the target is halved, so a curved
 * attainment cannot stall one end. An estimate within the tolerance of an end is moved to the probe that
 * closes the bracket from that end if it lands on the other side (1 % from it, less CLOSE_MARGIN): an
 * estimate that good is as likely on either side, and a probe a hair inside it would leave the bracket open
 * on one of them. Past capacity a run costs more (queues, sheds), so finding the crossing in few probes is
 * most of a race's speed. On synthetic curves with the noise of 2-minute runs (±0.4 % attainment, linear
 * to steeply bent past the crossing) this took 4.8 probes a search from starts within ±4 % in 10 % steps,
 * where regula falsi kept half a tolerance inside the ends, with a geometric midpoint after two probes on
 * one side, took 5.7 (race-stats.test.ts); about 7.7 against 8.4 from starts within ±30 % in 25 % steps.
 */
export async function bisectCapacity(attainment: (rate: number) => Promise<number>, o: BisectOptions): Promise<BisectResult> {
  if (!(o.start > 0 && o.step > 1 && o.tolerance > 0 && o.maxBracketSteps >= 1)) throw new RangeError('bisectCapacity: bad options');
  const tried: number[] = [];
  const probe = async (x: number): Promise<number> => {
    tried.push(x);
    return attainment(x);
  };
  let lo: number | null = null;
  let hi: number | null = null;
  let loA = Number.NaN;
  let hiA = Number.NaN;
  let x = o.start;
  let a = Number.NaN;
  // The first probe at `start`, then up by `step` after passes, down by what the attainment suggests after
  // fails, until one of each brackets the crossing.
  for (let i = 0; i <= o.maxBracketSteps && (lo === null || hi === null); i++) {
    if (i > 0) x *= hi === null ? o.step : Math.max(1 / MAX_DOWN_FACTOR, Math.min(1 / o.step, a / o.target));
    a = await probe(x);
    if (a >= o.target) {
      lo = x;
      loA = a;
    } else {
      hi = x;
      hiA = a;
    }
  }
  if (lo === null || hi === null) return { lo, loAttainment: loA, hi, hiAttainment: hiA, tried };
  const close = (1 + o.tolerance) / (1 + CLOSE_MARGIN);
  let l: number = lo;
  let h: number = hi;
  // Each end's attainment less the target, as the Illinois rule weighs it (halved while the other side wins).
  let fl = loA - o.target;
  let fh = hiA - o.target;
  let lastSide = 0;
  while (h > l * (1 + o.tolerance)) {
    let next = fl > fh ? l + ((h - l) * fl) / (fl - fh) : Math.sqrt(l * h);
    if (next < l * close) next = l * close;
    else if (next > h / close) next = h / close;
    a = await probe(next);
    if (a >= o.target) {
      l = next;
      loA = a;
      fl = a - o.target;
      if (lastSide > 0) fh /= 2;
      lastSide = 1;
    } else {
      h = next;
      hiA = a;
      fh = a - o.target;
      if (lastSide < 0) fl /= 2;
      lastSide = -1;
    }
  }
  return { lo: l, loAttainment: loA, hi: h, hiAttainment: hiA, tried };
}

/**
 * Where attainment crosses `target` between a rate that passed (attainment `loAtt` ≥ target at `lo`) and one
 * that failed (`hiAtt` < target at `hi`), linearly in attainment: the bisection's bracket read to better than
 * its width, so per-seed figures are not quantised to its steps.
 */
export function crossing(lo: number, loAtt: number, hi: number, hiAtt: number, target: number): number {
  if (!(loAtt >= target && hiAtt < target && hi > lo)) return lo;
  return lo + ((hi - lo) * (loAtt - target)) / (loAtt - hiAtt);
}

/**
 * A contender's start on a later seed: its capacity on the first seed times the reference contender's
 * capacity on this seed over the reference's on the first seed (a seed's window and engine bias move every
 * contender alike). Null when any of the three is missing or not positive.
 */
export function pairedStart(ownFirst: number | null, refFirst: number | null, refThis: number | null): number | null {
  if (ownFirst === null || refFirst === null || refThis === null || !(ownFirst > 0 && refFirst > 0 && refThis > 0)) return null;
  return (ownFirst * refThis) / refFirst;
}

export interface PairedRatio {
  /** Per seed: a / b; null where b is 0 (no ratio). */
  perSeed: Array<number | null>;
  /** Mean of the per-seed ratios and its paired 95 % Student-t interval; null when a seed has no ratio. */
  mean: number | null;
  ci95: [number, number] | null;
}

/**
 * The paired comparison of two contenders measured on the same seeds: the ratio at each seed (their
 * requests and engines are the same there), its mean and t-interval over seeds.
 */
export function pairedRatio(a: readonly number[], b: readonly number[]): PairedRatio {
  if (a.length !== b.length || a.length === 0) throw new RangeError('pairedRatio: the same non-empty seeds on both sides');
  const perSeed = a.map((x, i) => (b[i]! > 0 ? x / b[i]! : null));
  if (perSeed.some((r) => r === null)) return { perSeed, mean: null, ci95: null };
  const m = meanInterval(perSeed as number[]);
  return { perSeed, mean: m.mean, ci95: m.ci95 };
}

/** What goodputPeaks reads of a run. */
export interface GoodputSample {
  goodput_rps: number;
  slo_attainment: number;
}

/**
 * A bisection's peak goodput, from the runs that met the attainment target (at or under SLO capacity), and
 * the best goodput of any of its runs (0 when none). Past capacity admission keeps the requests that fit,
 * the cheaper ones on a mix of prompt lengths, so goodput in requests/s there keeps rising with the load and
 * says more about the mix kept than about the fleet; how far past capacity the bisection probes depends on
 * where it starts (the pool's computed capacity: four times the SLO capacity on Azure's code trace).
 */
export function goodputPeaks(runs: readonly GoodputSample[], target: number): { peak: number; bestProbe: number } {
  let peak = 0;
  let bestProbe = 0;
  for (const r of runs) {
    if (r.goodput_rps > bestProbe) bestProbe = r.goodput_rps;
    if (r.slo_attainment >= target && r.goodput_rps > peak) peak = r.goodput_rps;
  }
  return { peak, bestProbe };
}
