// Histogram bucket boundaries for every gateway histogram, each chosen against the design's SLAs.
// Thread: any (constants only). Not on the hot path: read once when the histograms are built.
// Every SLA threshold is itself a bucket boundary, so "share of requests under the SLA" is an exact
// bucket ratio and histogram_quantile only interpolates between points we picked on purpose.
// Cost: each boundary is one more series per label set; ~12-18 boundaries keep a histogram under 20 series.

/** TTFT: SLA p50 < 180 ms and p99 < 400 ms; 0.18 and 0.4 are boundaries; tail to 30 s for long queues. */
export const TTFT_BUCKETS_SECONDS = [
  0.025, 0.05, 0.075, 0.1, 0.15, 0.18, 0.2, 0.25, 0.3, 0.4, 0.5, 0.75, 1, 2, 5, 10, 30,
] as const;

/** TPOT: SLA p95 < 50 ms; an A100 8B decodes at ~24 ms/token and a preempted sequence jumps to ~400 ms. */
export const TPOT_BUCKETS_SECONDS = [
  0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.2, 0.4, 1,
] as const;

/** End to end: 300 output tokens at 50 ms is 15 s, so resolution sits around 1-20 s; 300 s catches stuck streams. */
export const DURATION_BUCKETS_SECONDS = [
  0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 20, 30, 60, 120, 300,
] as const;

/** Gateway overhead (total minus replica and queue time): SLA p99 < 10 ms; sub-ms resolution below it. */
export const OVERHEAD_BUCKETS_SECONDS = [
  0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.025, 0.05, 0.1, 0.25,
] as const;

/** Admission queue wait: admission.max_queue_ms defaults to 2,000 ms, so the top boundaries bracket it. */
export const QUEUE_WAIT_BUCKETS_SECONDS = [
  0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5,
] as const;

/** Client disconnect → upstream aborted: should be one event-loop turn (< 1 ms); 1 s means a leak of GPU time. */
export const CANCEL_LATENCY_BUCKETS_SECONDS = [
  0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1,
] as const;

/** Tokenize + block hash: ~4 ms for 1,800 tokens (design); 100 µs for short prompts, 250 ms for 128k contexts. */
export const TOKENIZE_BUCKETS_SECONDS = [
  0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
] as const;

/** Replica /metrics scrape: polled every 100 ms with a 1 s timeout (registry config defaults). */
export const SCRAPE_BUCKETS_SECONDS = [
  0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
] as const;

/** Predicted minus reported cached tokens: 0 when the prefix index was right; negative when the replica held
 * more than predicted (a cold pick that hit, another gateway's traffic), positive when it had evicted or
 * never held what the index believed (16-token blocks up to a 32k-token prompt). */
export const CACHE_ERROR_BUCKETS_TOKENS = [-32768, -4096, -1024, -256, -16, 0, 16, 256, 1024, 4096, 32768] as const;

/** GPU-time model's TTFT error, (predicted − observed) / observed: the aim is ±15 % at the median; a wrong
 * queue estimate shows as ±50 % or more; the bounds bracket both sides around 0. */
export const TTFT_PREDICTION_ERROR_BUCKETS = [-0.75, -0.5, -0.3, -0.15, -0.05, 0, 0.05, 0.15, 0.3, 0.5, 1, 2] as const;
