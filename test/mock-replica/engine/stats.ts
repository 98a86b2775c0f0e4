// What the mock's /metrics page needs from the engine: counters, gauges, LoRA info and histograms with vLLM
// V1's bucket bounds (docs/vllm-facts.md "Metrics"), plus the Histogram that records them.
// Thread: main of the mock process. Hot path: Histogram.observe runs a few times per token (a short linear
// scan over ≤ 22 bounds); snapshots allocate and are taken only per scrape.

/**
 * One histogram as Prometheus exposes it. `counts` is CUMULATIVE: counts[i] = observations ≤ buckets[i], i.e.
 * exactly the `_bucket{le="buckets[i]"}` series; the `le="+Inf"` bucket is `count`.
 */
export interface HistogramSnapshot {
  buckets: number[];
  counts: number[];
  sum: number;
  count: number;
}

export interface EngineStats {
  /** vllm:num_requests_running: requests in the running list, mid-prefill ones included. */
  running: number;
  /** vllm:num_requests_waiting: queued, preempted and LoRA-deferred requests. */
  waiting: number;
  /** vllm:kv_cache_usage_perc, 0..1: referenced blocks / (num_gpu_blocks − 1). */
  kv_cache_usage_perc: number;
  /** vllm:num_preemptions_total. */
  num_preemptions_total: number;
  /** vllm:prompt_tokens_total: the whole prompt (cached part included) added when its first token is sampled. */
  prompt_tokens_total: number;
  /** vllm:generation_tokens_total. */
  generation_tokens_total: number;
  /** vllm:request_success_total{finished_reason}. */
  request_success_total: { stop: number; length: number; abort: number };
  /** vllm:prefix_cache_queries_total / _hits_total, in tokens, counted once per admission (first or after preemption). */
  prefix_cache_queries_total: number;
  prefix_cache_hits_total: number;
  /** vllm:lora_requests_info labels (adapter names; join with ',' for the label value). */
  lora: { max_lora: number; running_lora_adapters: string[]; waiting_lora_adapters: string[] };
  /** Histograms, keyed by the vLLM name without the `vllm:` prefix. */
  histograms: {
    time_to_first_token_seconds: HistogramSnapshot;
    inter_token_latency_seconds: HistogramSnapshot;
    /** Mean inter-token time of each finished request (v0.11+ name). */
    request_time_per_output_token_seconds: HistogramSnapshot;
    e2e_request_latency_seconds: HistogramSnapshot;
    request_queue_time_seconds: HistogramSnapshot;
    request_prefill_time_seconds: HistogramSnapshot;
    request_decode_time_seconds: HistogramSnapshot;
    request_inference_time_seconds: HistogramSnapshot;
    request_prompt_tokens: HistogramSnapshot;
    request_generation_tokens: HistogramSnapshot;
    iteration_tokens_total: HistogramSnapshot;
  };
}

/** EngineStats without the histograms: what a scrape that reads only gauges and counters needs. */
export type EngineCounters = Omit<EngineStats, 'histograms'>;

export const TTFT_BUCKETS_SECONDS = [
  0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560,
] as const;
export const ITL_BUCKETS_SECONDS = [
  0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80,
] as const;
export const REQUEST_LATENCY_BUCKETS_SECONDS = [
  0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680,
] as const;
export const ITERATION_TOKENS_BUCKETS = [1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384] as const;

/** vLLM's build_1_2_5_buckets(maxValue): 1, 2, 5, 10, 20, 50, … up to maxValue. */
export function build125Buckets(maxValue: number): number[] {
  const out: number[] = [];
  for (let scale = 1; ; scale *= 10) {
    for (const m of [1, 2, 5]) {
      if (m * scale > maxValue) return out;
      out.push(m * scale);
    }
  }
}

export class Histogram {
  readonly buckets: readonly number[];
  /** Non-cumulative: perBucket[i] counts (buckets[i−1], buckets[i]]; the last cell is the +Inf overflow. */
  private readonly perBucket: Float64Array;
  sum = 0;
  count = 0;

  constructor(buckets: readonly number[]) {
    this.buckets = buckets;
    this.perBucket = new Float64Array(buckets.length + 1);
  }

  observe(value: number): void {
    const b = this.buckets;
    let i = 0;
    while (i < b.length && value > b[i]!) i++;
    this.perBucket[i]!++;
    this.sum += value;
    this.count++;
  }

  snapshot(): HistogramSnapshot {
    const counts: number[] = new Array<number>(this.buckets.length);
    let acc = 0;
    for (let i = 0; i < this.buckets.length; i++) {
      acc += this.perBucket[i]!;
      counts[i] = acc;
    }
    return { buckets: [...this.buckets], counts, sum: this.sum, count: this.count };
  }
}

/** The engine's histograms, created once per engine. */
export class EngineHistograms {
  readonly ttft = new Histogram(TTFT_BUCKETS_SECONDS);
  readonly itl = new Histogram(ITL_BUCKETS_SECONDS);
  readonly tpot = new Histogram(ITL_BUCKETS_SECONDS);
  readonly e2e = new Histogram(REQUEST_LATENCY_BUCKETS_SECONDS);
  readonly queue = new Histogram(REQUEST_LATENCY_BUCKETS_SECONDS);
  readonly prefill = new Histogram(REQUEST_LATENCY_BUCKETS_SECONDS);
  readonly decode = new Histogram(REQUEST_LATENCY_BUCKETS_SECONDS);
  readonly inference = new Histogram(REQUEST_LATENCY_BUCKETS_SECONDS);
  readonly promptTokens: Histogram;
  readonly generationTokens: Histogram;
  readonly iterationTokens = new Histogram(ITERATION_TOKENS_BUCKETS);

  constructor(maxModelLen: number) {
    const tokenBuckets = build125Buckets(maxModelLen);
    this.promptTokens = new Histogram(tokenBuckets);
    this.generationTokens = new Histogram(tokenBuckets);
  }

  snapshot(): EngineStats['histograms'] {
    return {
      time_to_first_token_seconds: this.ttft.snapshot(),
      inter_token_latency_seconds: this.itl.snapshot(),
      request_time_per_output_token_seconds: this.tpot.snapshot(),
      e2e_request_latency_seconds: this.e2e.snapshot(),
      request_queue_time_seconds: this.queue.snapshot(),
      request_prefill_time_seconds: this.prefill.snapshot(),
      request_decode_time_seconds: this.decode.snapshot(),
      request_inference_time_seconds: this.inference.snapshot(),
      request_prompt_tokens: this.promptTokens.snapshot(),
      request_generation_tokens: this.generationTokens.snapshot(),
      iteration_tokens_total: this.iterationTokens.snapshot(),
    };
  }
}
