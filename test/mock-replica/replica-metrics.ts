// The mock's /metrics: vLLM V1 PrometheusStatLogger names, labels and help texts (reference/vllm-facts.md
// §3), fed by the per-request timestamps that also drive the SSE timing, plus gauges read from the engine
// snapshot at scrape time. `legacyMetrics` adds the pre-v0.12 names (gpu_* and time_per_output_token).
// Thread: main (mock process). observe* calls are on the per-token path (a few float adds); render is per scrape.
import type { EngineSnapshot } from './engine/types.ts';
import { Histogram, PromWriter, buckets125 } from './prom-text.ts';

const TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560];
const ITL_BUCKETS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80];
const REQUEST_LATENCY_BUCKETS = [0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680];

export interface MetricsConfig {
  modelName: string;
  maxModelLen: number;
  blockSize: number;
  numGpuBlocks: number;
  /** null when LoRA is not enabled (no vllm:lora_requests_info then). */
  maxLoras: number | null;
  legacyMetrics: boolean;
}

export type FinishedReason = 'stop' | 'length' | 'abort';

/** Per-request timestamps (ms on the mock's clock) the handler records. */
export interface RequestTimes {
  arrivalMs: number;
  firstTokenMs: number;
  lastTokenMs: number;
  promptTokens: number;
  cachedTokens: number;
  generatedTokens: number;
  maxTokensParam: number;
}

export class ReplicaMetrics {
  private readonly createdSeconds = Date.now() / 1000;
  private readonly labels: Record<string, string>;
  private promptTokensTotal = 0;
  private generationTokensTotal = 0;
  private prefixQueries = 0;
  private prefixHits = 0;
  private readonly success = { stop: 0, length: 0, abort: 0 };
  private readonly ttft: Histogram;
  private readonly itl: Histogram;
  private readonly tpotPerRequest: Histogram;
  private readonly e2e: Histogram;
  private readonly decode: Histogram;
  private readonly promptTokensHist: Histogram;
  private readonly generationTokensHist: Histogram;
  private readonly maxTokensHist: Histogram;
  /** lora_requests_info series: label key → [labels, last timestamp]. */
  private readonly loraSeries = new Map<string, [Record<string, string>, number]>();

  constructor(private readonly cfg: MetricsConfig) {
    this.labels = { engine: '0', model_name: cfg.modelName };
    const c = this.createdSeconds;
    const tokenBuckets = buckets125(cfg.maxModelLen);
    this.ttft = new Histogram(TTFT_BUCKETS, c);
    this.itl = new Histogram(ITL_BUCKETS, c);
    this.tpotPerRequest = new Histogram(ITL_BUCKETS, c);
    this.e2e = new Histogram(REQUEST_LATENCY_BUCKETS, c);
    this.decode = new Histogram(REQUEST_LATENCY_BUCKETS, c);
    this.promptTokensHist = new Histogram(tokenBuckets, c);
    this.generationTokensHist = new Histogram(tokenBuckets, c);
    this.maxTokensHist = new Histogram(tokenBuckets, c);
  }

  /** Prefill done: prompt tokens count now (vLLM adds them at first-token time), with the cache hit. */
  onFirstToken(promptTokens: number, cachedTokens: number, ttftSeconds: number): void {
    this.promptTokensTotal += promptTokens;
    this.prefixQueries += promptTokens;
    this.prefixHits += cachedTokens;
    this.ttft.observe(ttftSeconds);
  }

  /** One generated token; `itlSeconds` < 0 for the first token (no inter-token gap yet). */
  onToken(itlSeconds: number): void {
    this.generationTokensTotal++;
    if (itlSeconds >= 0) this.itl.observe(itlSeconds);
  }

  onFinish(reason: FinishedReason, t: RequestTimes, nowMs: number): void {
    this.success[reason]++;
    this.e2e.observe((nowMs - t.arrivalMs) / 1000);
    this.promptTokensHist.observe(t.promptTokens);
    this.generationTokensHist.observe(t.generatedTokens);
    this.maxTokensHist.observe(t.maxTokensParam);
    if (t.generatedTokens > 0) {
      const decodeSeconds = (t.lastTokenMs - t.firstTokenMs) / 1000;
      this.decode.observe(decodeSeconds);
      if (t.generatedTokens > 1) this.tpotPerRequest.observe(decodeSeconds / (t.generatedTokens - 1));
    }
  }

  render(s: EngineSnapshot): string {
    const w = new PromWriter();
    const L = this.labels;
    const usage = s.total_blocks > 1 ? Math.max(0, Math.min(1, 1 - s.free_blocks / (s.total_blocks - 1))) : 0;
    w.gauge('vllm:num_requests_running', 'Number of requests in model execution batches.', [[L, s.running]]);
    w.gauge('vllm:num_requests_waiting', 'Number of requests waiting to be processed.', [[L, s.waiting]]);
    if (this.cfg.legacyMetrics) {
      w.gauge('vllm:gpu_cache_usage_perc', 'GPU KV-cache usage. 1 means 100 percent usage.(DEPRECATED. Use vllm:kv_cache_usage_perc instead.)', [[L, usage]]);
    }
    w.gauge('vllm:kv_cache_usage_perc', 'KV-cache usage. 1 means 100 percent usage.', [[L, usage]]);
    if (this.cfg.legacyMetrics) {
      w.counter('vllm:gpu_prefix_cache_queries', 'GPU prefix cache queries, in terms of number of queried tokens.(DEPRECATED. Use vllm:prefix_cache_queries instead.)', [[L, this.prefixQueries]], this.createdSeconds);
      w.counter('vllm:gpu_prefix_cache_hits', 'GPU prefix cache hits, in terms of number of cached tokens.(DEPRECATED. Use vllm:prefix_cache_hits instead.)', [[L, this.prefixHits]], this.createdSeconds);
    }
    w.counter('vllm:prefix_cache_queries', 'Prefix cache queries, in terms of number of queried tokens.', [[L, this.prefixQueries]], this.createdSeconds);
    w.counter('vllm:prefix_cache_hits', 'Prefix cache hits, in terms of number of cached tokens.', [[L, this.prefixHits]], this.createdSeconds);
    w.counter('vllm:num_preemptions', 'Cumulative number of preemption from the engine.', [[L, s.preemptions]], this.createdSeconds);
    w.counter('vllm:prompt_tokens', 'Number of prefill tokens processed.', [[L, this.promptTokensTotal]], this.createdSeconds);
    w.counter('vllm:generation_tokens', 'Number of generation tokens processed.', [[L, this.generationTokensTotal]], this.createdSeconds);
    w.counter('vllm:request_success', 'Count of successfully processed requests.', (['stop', 'length', 'abort'] as const).map((r) => [{ ...L, finished_reason: r }, this.success[r]]), this.createdSeconds);
    w.histogram('vllm:request_prompt_tokens', 'Number of prefill tokens processed.', L, this.promptTokensHist);
    w.histogram('vllm:request_generation_tokens', 'Number of generation tokens processed.', L, this.generationTokensHist);
    w.histogram('vllm:request_params_max_tokens', 'Histogram of the max_tokens request parameter.', L, this.maxTokensHist);
    w.histogram('vllm:time_to_first_token_seconds', 'Histogram of time to first token in seconds.', L, this.ttft);
    if (this.cfg.legacyMetrics) {
      w.histogram('vllm:time_per_output_token_seconds', 'Histogram of time per output token in seconds.DEPRECATED: Use vllm:inter_token_latency_seconds instead.', L, this.itl);
    }
    w.histogram('vllm:inter_token_latency_seconds', 'Histogram of inter-token latency in seconds.', L, this.itl);
    w.histogram('vllm:request_time_per_output_token_seconds', 'Histogram of time_per_output_token_seconds per request.', L, this.tpotPerRequest);
    w.histogram('vllm:e2e_request_latency_seconds', 'Histogram of e2e request latency in seconds.', L, this.e2e);
    w.histogram('vllm:request_decode_time_seconds', 'Histogram of time spent in DECODE phase for request.', L, this.decode);
    w.gauge('vllm:cache_config_info', 'Information of the LLMEngine CacheConfig', [[this.cacheConfigLabels(), 1]]);
    if (this.cfg.maxLoras !== null) w.gauge('vllm:lora_requests_info', 'Running stats on lora requests.', this.loraInfo(s));
    return w.text();
  }

  private cacheConfigLabels(): Record<string, string> {
    return {
      block_size: String(this.cfg.blockSize),
      cache_dtype: 'auto',
      calculate_kv_scales: 'False',
      cpu_offload_gb: '0',
      enable_prefix_caching: 'True',
      engine: '0',
      gpu_memory_utilization: '0.9',
      is_attention_free: 'False',
      num_cpu_blocks: 'None',
      num_gpu_blocks: String(this.cfg.numGpuBlocks),
      num_gpu_blocks_override: 'None',
      prefix_caching_hash_algo: 'sha256',
      sliding_window: 'None',
      swap_space: '4',
    };
  }

  /** Every label combination seen keeps its last timestamp; consumers take the largest value. */
  private loraInfo(s: EngineSnapshot): Array<[Record<string, string>, number]> {
    const running = new Set<string>();
    const waiting = new Set<string>();
    for (const r of s.requests) {
      if (r.adapter === null) continue;
      if (r.state === 'running') running.add(r.adapter);
      else if (r.state === 'waiting' || r.state === 'preempted') waiting.add(r.adapter);
    }
    const labels = { max_lora: String(this.cfg.maxLoras), running_lora_adapters: [...running].join(','), waiting_lora_adapters: [...waiting].join(',') };
    const key = `${labels.running_lora_adapters}|${labels.waiting_lora_adapters}`;
    this.loraSeries.set(key, [labels, Date.now() / 1000]);
    return [...this.loraSeries.values()];
  }
}
