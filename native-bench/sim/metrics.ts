// What a run measures and how it is summarised: per-request outcomes (TTFT, mean TPOT, SLO met), prefix hit
// rates measured by the engines and predicted by the router, KV occupancy and in-flight balance sampled at
// each scrape, shed requests and how fast they were answered. Only requests that arrive after the warm-up
// (the first 10 % of the run) count, and only samples taken after it.
// Thread: the run's. Hot path: one record() per finished request, one sample() per scrape.
import { idlePrefillMs, PROFILES } from '../../test/mock-replica/engine/profiles.ts';
import type { ProfileName } from '../../test/mock-replica/engine/types.ts';

/** TTFT bound for prompts up to this many tokens; longer ones get 1.25 × their idle-replica TTFT. */
export const SLO_SHORT_PROMPT_TOKENS = 4000;
export const SLO_SHORT_TTFT_MS = 400;
export const SLO_LONG_TTFT_FACTOR = 1.25;
export const SLO_TPOT_MS = 50;

/** The TTFT a request must meet on a pool of this profile. */
export function ttftBoundMs(profile: ProfileName, promptTokens: number): number {
  if (promptTokens <= SLO_SHORT_PROMPT_TOKENS) return SLO_SHORT_TTFT_MS;
  return SLO_LONG_TTFT_FACTOR * idlePrefillMs(PROFILES[profile], promptTokens);
}

/** Nearest-rank percentile of `values` (sorted in place); NaN when empty. */
export function percentile(values: Float64Array | number[], q: number): number {
  const n = values.length;
  if (n === 0) return Number.NaN;
  const rank = Math.min(n - 1, Math.max(0, Math.ceil(q * n) - 1));
  return values[rank]!;
}

function sorted(values: number[]): Float64Array {
  return Float64Array.from(values).sort();
}

export interface RunFigures {
  offered: number;
  admitted: number;
  completed: number;
  met: number;
  shed: number;
  failed: number;
  windowMs: number;
  ttftP50: number;
  ttftP99: number;
  tpotP95: number;
  shedAnswerP99: number;
  kvOccupancyMean: number;
  /** Admitted requests (answered by a replica) and how many of them met their SLO. */
  admittedAnswered: number;
  admittedMet: number;
  /** Sheds decided at arrival (not after waiting in the queue). */
  shedAtArrival: number;
  /** |predicted − measured| / measured of the GPU-time model's TTFT at admission (from dispatch), p50 and p90. */
  ttftPredErrP50: number;
  ttftPredErrP90: number;
  /** |predicted − produced| / produced of reply lengths predicted at dispatch: median, p90, and how many. */
  replyPredErrP50: number;
  replyPredErrP90: number;
  replyPredictions: number;
  preemptions: number;
  hitMeasured: number;
  hitPredicted: number;
  inflightMaxOverMean: number;
  /** Requests whose TTFT was predicted at dispatch (the errors above are over these). */
  ttftPredictions: number;
}

export class RunMetrics {
  offered = 0;
  admitted = 0;
  completed = 0;
  met = 0;
  shed = 0;
  failed = 0;
  private readonly ttft: number[] = [];
  private readonly tpot: number[] = [];
  private readonly shedAnswer: number[] = [];
  private readonly predErr: number[] = [];
  private readonly replyErr: number[] = [];
  admittedAnswered = 0;
  admittedMet = 0;
  shedAtArrival = 0;
  private promptTokens = 0;
  private cachedTokens = 0;
  private predictedTokens = 0;
  private kvSum = 0;
  private kvSamples = 0;
  private ratioSum = 0;
  private ratioSamples = 0;
  preemptions = 0;

  /**
   * One measured request's outcome. `ttftMs` NaN = no first token; `tpotMs` is the mean over its tokens so
   * far (0 for a single token); `finished` false = it was still streaming when the run ended, or `broken`:
   * its stream was cut by a dying replica (an error, never within the SLO).
   */
  record(profile: ProfileName, promptTokens: number, ttftMs: number, tpotMs: number, finished: boolean, broken: boolean,
    cachedTokens: number, predictedTokens: number): boolean {
    if (finished) this.completed++;
    if (Number.isNaN(ttftMs)) return false;
    this.ttft.push(ttftMs);
    if (finished) this.tpot.push(tpotMs);
    this.promptTokens += promptTokens;
    this.cachedTokens += cachedTokens;
    this.predictedTokens += predictedTokens;
    const met = !broken && ttftMs <= ttftBoundMs(profile, promptTokens) && tpotMs <= SLO_TPOT_MS;
    if (met) this.met++;
    return met;
  }

  /** An admitted request's outcome: admission expected it to meet its SLO. */
  recordAdmitted(met: boolean): void {
    this.admittedAnswered++;
    if (met) this.admittedMet++;
  }

  /** The model's TTFT prediction at admission against the engine's (both from dispatch). */
  /** A finished reply of `producedTokens` whose length was predicted at dispatch as `predictedTokens`. */
  recordReplyPrediction(predictedTokens: number, producedTokens: number): void {
    if (producedTokens > 0 && Number.isFinite(predictedTokens)) this.replyErr.push(Math.abs(predictedTokens - producedTokens) / producedTokens);
  }

  recordPrediction(predictedMs: number, measuredMs: number): void {
    if (measuredMs > 0 && Number.isFinite(predictedMs)) this.predErr.push(Math.abs(predictedMs - measuredMs) / measuredMs);
  }

  recordShed(answerMs: number, atArrival: boolean): void {
    this.shed++;
    if (atArrival) this.shedAtArrival++;
    this.shedAnswer.push(answerMs);
  }

  /** A scrape-time sample: mean KV use over the pool's replicas, and max/mean of their in-flight tokens. */
  sample(kvMean: number, inflightMax: number, inflightMean: number): void {
    this.kvSum += kvMean;
    this.kvSamples++;
    if (inflightMean > 0) {
      this.ratioSum += inflightMax / inflightMean;
      this.ratioSamples++;
    }
  }

  figures(windowMs: number): RunFigures {
    return {
      offered: this.offered,
      admitted: this.admitted,
      completed: this.completed,
      met: this.met,
      shed: this.shed,
      failed: this.failed,
      windowMs,
      ttftP50: percentile(sorted(this.ttft), 0.5),
      ttftP99: percentile(sorted(this.ttft), 0.99),
      tpotP95: percentile(sorted(this.tpot), 0.95),
      shedAnswerP99: percentile(sorted(this.shedAnswer), 0.99),
      kvOccupancyMean: this.kvSamples > 0 ? this.kvSum / this.kvSamples : Number.NaN,
      admittedAnswered: this.admittedAnswered,
      admittedMet: this.admittedMet,
      shedAtArrival: this.shedAtArrival,
      ttftPredErrP50: percentile(sorted(this.predErr), 0.5),
      ttftPredErrP90: percentile(sorted(this.predErr), 0.9),
      replyPredErrP50: percentile(sorted(this.replyErr), 0.5),
      replyPredErrP90: percentile(sorted(this.replyErr), 0.9),
      replyPredictions: this.replyErr.length,
      preemptions: this.preemptions,
      hitMeasured: this.promptTokens > 0 ? this.cachedTokens / this.promptTokens : Number.NaN,
      hitPredicted: this.promptTokens > 0 ? this.predictedTokens / this.promptTokens : Number.NaN,
      inflightMaxOverMean: this.ratioSamples > 0 ? this.ratioSum / this.ratioSamples : Number.NaN,
      ttftPredictions: this.predErr.length,
    };
  }
}
