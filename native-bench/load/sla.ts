// The design's service levels and the verdict of one open-loop step against them. The design states one
// SLA for every tenant (the config's sla_tier changes how long a request may queue for admission, not these
// targets): TTFT p50 under 180 ms and p99 under 400 ms for prompts up to 4,000 tokens, TPOT p95 under 50 ms.
// Against time-scaled mock replicas every engine time shrinks by the time scale, so the targets do too
// (`scale`); the gateway's own cost does not, which makes a scaled run stricter on the gateway, not looser.
// A step also fails when more than `errorBudget` of its requests fail (non-2xx, transport error, a stream
// without [DONE]). Thread: bench main thread, after a step. Not on a hot path.
import { summarize } from './percentiles.ts';
import type { Percentiles } from './percentiles.ts';
import type { RequestRecord } from './open-loop.ts';

export const DESIGN_SLA = {
  ttftP50Ms: 180,
  ttftP99Ms: 400,
  /** The TTFT targets cover prompts up to this many tokens. */
  ttftPromptLimit: 4000,
  tpotP95Ms: 50,
} as const;

export interface SlaTargets { ttftP50Ms: number; ttftP99Ms: number; tpotP95Ms: number; ttftPromptLimit: number }

export function scaledSla(scale: number): SlaTargets {
  return {
    ttftP50Ms: DESIGN_SLA.ttftP50Ms * scale,
    ttftP99Ms: DESIGN_SLA.ttftP99Ms * scale,
    tpotP95Ms: DESIGN_SLA.tpotP95Ms * scale,
    ttftPromptLimit: DESIGN_SLA.ttftPromptLimit,
  };
}

export interface StepSummary {
  requests: number;
  ok: number;
  failed: number;
  statusCounts: Record<string, number>;
  /** TTFT of successful streams whose prompt is within the SLA's limit (planned tokens in `tag`, else usage). */
  ttft: Percentiles;
  /** TTFT of the longer prompts, reported apart: the design gives them no target. */
  ttftLong: Percentiles;
  tpot: Percentiles;
  total: Percentiles;
  sendLag: Percentiles;
  meanPromptTokens: number;
  meanCompletionTokens: number;
  held: boolean;
  /** Which targets missed, e.g. `ttft p99 512 > 400`; empty when held. */
  missed: string[];
}

const f1 = (x: number): string => (Number.isFinite(x) ? x.toFixed(1) : 'n/a');

/** Prompt size of a record: the usage chunk's count, else the planned count carried in the tag. */
function promptOf(r: RequestRecord): number {
  return r.promptTokens ?? Number(r.tag);
}

export function summarizeStep(records: readonly RequestRecord[], sla: SlaTargets, errorBudget: number): StepSummary {
  const ok = records.filter((r) => r.error === null && r.status >= 200 && r.status < 300);
  const statusCounts: Record<string, number> = {};
  for (const r of records) statusCounts[String(r.status)] = (statusCounts[String(r.status)] ?? 0) + 1;
  const short = ok.filter((r) => promptOf(r) <= sla.ttftPromptLimit);
  const long = ok.filter((r) => promptOf(r) > sla.ttftPromptLimit);
  const ttft = summarize(short.map((r) => r.ttftMs).filter(Number.isFinite));
  const tpot = summarize(ok.map((r) => r.tpotMs).filter(Number.isFinite));
  const failed = records.length - ok.length;
  const missed: string[] = [];
  if (records.length === 0) missed.push('no requests');
  if (failed > errorBudget * records.length) missed.push(`errors ${failed}/${records.length}`);
  if (ttft.p50 > sla.ttftP50Ms) missed.push(`ttft p50 ${f1(ttft.p50)} > ${f1(sla.ttftP50Ms)}`);
  if (ttft.p99 > sla.ttftP99Ms) missed.push(`ttft p99 ${f1(ttft.p99)} > ${f1(sla.ttftP99Ms)}`);
  if (tpot.p95 > sla.tpotP95Ms) missed.push(`tpot p95 ${f1(tpot.p95)} > ${f1(sla.tpotP95Ms)}`);
  const mean = (xs: number[]): number => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : NaN);
  return {
    requests: records.length, ok: ok.length, failed, statusCounts, ttft,
    ttftLong: summarize(long.map((r) => r.ttftMs).filter(Number.isFinite)),
    tpot,
    total: summarize(ok.map((r) => r.totalMs)),
    sendLag: summarize(records.map((r) => r.sendLagMs)),
    meanPromptTokens: mean(ok.map((r) => r.promptTokens).filter((x): x is number => x !== null)),
    meanCompletionTokens: mean(ok.map((r) => r.completionTokens).filter((x): x is number => x !== null)),
    held: missed.length === 0,
    missed,
  };
}

/**
 * The highest rate of an upward sweep that held, counting only rates below the first that broke (a noisy
 * pass above a failure does not count); NaN when the first rate already broke.
 */
export function lastHeldRate(steps: ReadonlyArray<{ rate: number; held: boolean }>): number {
  let last = NaN;
  for (const s of steps) {
    if (!s.held) break;
    last = s.rate;
  }
  return last;
}
