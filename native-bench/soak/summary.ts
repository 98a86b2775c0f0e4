// The soak's verdict and table: intervals (one per sample) grouped into about a dozen rows, RSS growth from
// the end of warm-up (median of the first two minutes after it) to the end (median of the last two), and the
// pass/fail rules. Thread: main. Formatting only.
import type { GatewaySample } from './sampler.ts';

export interface Interval {
  /** End of the interval, seconds since the load started. */
  tS: number;
  sent: number;
  ok: number;
  cut: number;
  httpErrors: number;
  broken: number;
  /** HTTP errors by `status code` (`429 server_overloaded`). */
  statuses: Record<string, number>;
  sample: GatewaySample | null;
}

export const RSS_GROWTH_LIMIT = 0.05;
/** Growth compares the median RSS of the first and the last this many seconds after warm-up. */
export const RSS_WINDOW_S = 120;

const mb = (b: number): string => (b / 2 ** 20).toFixed(1);
function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/** Growth of the tokenizer caches, as a share of their bound, below which they count as levelled off. */
export const CACHE_SETTLED = 0.02;

/**
 * When warm-up ends: `minWarmS`, or later the first sample from which the tokenizer caches never grow by more
 * than CACHE_SETTLED of their bound again (they are full, or as full as this traffic makes them; with
 * tokenizer.threads workers each encoder has its own share of the bound, so the sum can settle below it).
 * Until then RSS grows by design; judging growth from an earlier point would count a bounded cache as a leak.
 * `cacheSettledS` is null when they levelled off only in the run's last third, or never (growth is then
 * judged from `minWarmS`, which counts their filling against the gateway).
 */
export function warmupEnd(intervals: readonly Interval[], minWarmS: number, cacheBoundBytes: number): { warmS: number; cacheSettledS: number | null } {
  const sampled = intervals.filter((iv) => iv.sample !== null);
  let cacheSettledS: number | null = null;
  let laterMax = Number.NEGATIVE_INFINITY;
  // Walk back from the end: a sample qualifies when nothing after it exceeds it by more than the margin.
  for (let i = sampled.length - 1; i >= 0; i--) {
    const v = sampled[i]!.sample!.tokenizerCacheBytes;
    if (laterMax - v > CACHE_SETTLED * cacheBoundBytes) break;
    if (i < sampled.length - 3) cacheSettledS = sampled[i]!.tS;
    if (v > laterMax) laterMax = v;
  }
  const endS = sampled.length > 0 ? sampled[sampled.length - 1]!.tS : 0;
  if (cacheSettledS !== null && cacheSettledS > (endS * 2) / 3) cacheSettledS = null;
  return { warmS: Math.max(minWarmS, cacheSettledS ?? minWarmS), cacheSettledS };
}

export function summarizeSoak(intervals: readonly Interval[], warmS: number, final: GatewaySample, brokenDetails: readonly string[]) {
  const sampled = intervals.filter((iv) => iv.sample !== null);
  const after = sampled.filter((iv) => iv.tS >= warmS);
  // Medians over RSS_WINDOW_S at each end: V8 grows and shrinks its heaps by tens of MB within a minute (a
  // mark-compact that gives pages back, a new space doubling), so single samples would judge the GC's phase.
  const spacingS = after.length > 1 ? (after[after.length - 1]!.tS - after[0]!.tS) / (after.length - 1) : 1;
  const n = Math.max(3, Math.round(RSS_WINDOW_S / spacingS));
  const atEnds = (f: (s: GatewaySample) => number): [number, number] =>
    [median(after.slice(0, n).map((iv) => f(iv.sample!))), median(after.slice(-n).map((iv) => f(iv.sample!)))];
  const [base, end] = atEnds((s) => s.rssBytes);
  const growth = after.length >= 2 * n ? end / base - 1 : Number.NaN;
  // Where growth would sit: V8's heaps (committed over all threads) or the native rest of the anonymous memory
  // (RssAnon minus committed heap and V8's external memory: glibc heaps, stacks, uWS).
  const committed = atEnds((s) => s.threadsHeapCommittedBytes);
  const native = atEnds((s) => s.rssAnonBytes - s.threadsHeapCommittedBytes - s.threadsExternalBytes);

  const rowsWanted = 12;
  const per = Math.max(1, Math.ceil(intervals.length / rowsWanted));
  const rows: Array<Array<string | number>> = [];
  for (let i = 0; i < intervals.length; i += per) {
    const g = intervals.slice(i, i + per);
    const s = g.filter((iv) => iv.sample !== null).map((iv) => iv.sample!);
    const last = s[s.length - 1];
    const sum = (f: (iv: Interval) => number): number => g.reduce((a, iv) => a + f(iv), 0);
    const statuses: Record<string, number> = {};
    for (const iv of g) for (const [k, v] of Object.entries(iv.statuses)) statuses[k] = (statuses[k] ?? 0) + v;
    rows.push([
      (g[g.length - 1]!.tS / 60).toFixed(1),
      last ? mb(last.rssBytes) : '-',
      last ? mb(last.rssAnonBytes) : '-',
      last ? mb(last.heapUsedBytes) : '-',
      last ? mb(last.threadsHeapBytes) : '-',
      last ? mb(last.threadsHeapCommittedBytes) : '-',
      last ? mb(last.threadsExternalBytes) : '-',
      last ? mb(last.tokenizerCacheBytes) : '-',
      s.length ? Math.max(...s.map((x) => x.loopP99Ms)).toFixed(1) : '-',
      s.length ? Math.max(...s.map((x) => x.loopMaxMs)).toFixed(0) : '-',
      sum((iv) => iv.sent), sum((iv) => iv.ok), sum((iv) => iv.cut),
      Object.entries(statuses).map(([k, v]) => `${v}×${k.split(' ')[0]}`).join(' ') || '0', sum((iv) => iv.broken),
    ]);
  }
  const total = (f: (iv: Interval) => number): number => intervals.reduce((a, iv) => a + f(iv), 0);
  const reasons: string[] = [];
  if (!(growth <= RSS_GROWTH_LIMIT)) reasons.push(`RSS grew ${(growth * 100).toFixed(1)} % after warm-up (limit ${RSS_GROWTH_LIMIT * 100} %)`);
  if (total((iv) => iv.broken) > 0) reasons.push(`${total((iv) => iv.broken)} broken answers: ${brokenDetails.join(' | ')}`);
  const byCode: Record<string, number> = {};
  for (const iv of intervals) for (const [k, v] of Object.entries(iv.statuses)) byCode[k] = (byCode[k] ?? 0) + v;
  if (final.inflight !== 0) reasons.push(`${final.inflight} requests still in flight in the gateway after the load`);
  return {
    columns: ['min', 'RSS MB', 'anon MB', 'heap MB (main)', 'heap MB (all threads)', 'heap committed MB (all)', 'V8 external MB (all)', 'tokenizer cache MB', 'loop p99 ms (max)', 'loop max ms', 'sent', 'ok', 'cut streams', 'HTTP errors', 'broken'],
    rows,
    failed: reasons.length > 0 ? reasons.join('; ') : undefined,
    notes: [
      `RSS after warm-up (${(warmS / 60).toFixed(1)} min; median of ${n} samples) ${mb(base)} MB, at the end ${mb(end)} MB: growth ${(growth * 100).toFixed(2)} % (limit ${RSS_GROWTH_LIMIT * 100} %)`,
      `same medians, V8 heaps committed over all threads ${mb(committed[0])} → ${mb(committed[1])} MB, native anonymous memory outside them ${mb(native[0])} → ${mb(native[1])} MB`,
      `requests: ${total((iv) => iv.sent)} sent, ${total((iv) => iv.ok)} complete, ${total((iv) => iv.cut)} streams cut by a fault with one error event, ${total((iv) => iv.httpErrors)} HTTP errors, ${total((iv) => iv.broken)} broken; gateway in flight after the load: ${final.inflight}`,
      `HTTP errors by status and code: ${Object.entries(byCode).map(([k, v]) => `${v} × ${k}`).join(', ') || 'none'}`,
      reasons.length > 0 ? `FAILED: ${reasons.join('; ')}` : 'PASSED',
    ],
  };
}
