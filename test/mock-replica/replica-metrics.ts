// The mock's /metrics: vLLM V1 PrometheusStatLogger names, labels and help texts (docs/vllm-facts.md
// "Metrics"), rendered at scrape time from engine.stats() (whose histograms are observed from the same step
// timestamps that drive the SSE frames) plus request_params_max_tokens, which only the HTTP layer knows.
// `legacyMetrics` adds the pre-v0.12 names (gpu_* and time_per_output_token). Thread: main (mock process).
// observeMaxTokens is per request; page() is per scrape, and renders only when something it shows changed
// (the engine's version or a max_tokens observed): an idle replica's scrape was ~0.8 ms of CPU, most of it
// rendering and encoding 33 KB that had not changed, and a demo fleet of ten replicas scraped ten times a
// second spent a fifth of a core on it beside the gateway it stands in front of.
import { build125Buckets, Histogram } from './engine/stats.ts';
import type { EngineStats } from './engine/types.ts';
import { PromWriter } from './prom-text.ts';

export interface MetricsConfig {
  modelName: string;
  maxModelLen: number;
  blockSize: number;
  numGpuBlocks: number;
  /** false: no vllm:lora_requests_info (vLLM without --enable-lora). */
  loraEnabled: boolean;
  legacyMetrics: boolean;
}

type Series = Array<[Record<string, string>, number]>;

export class ReplicaMetrics {
  private readonly createdSeconds = Date.now() / 1000;
  private readonly labels: Record<string, string>;
  private readonly maxTokensHist: Histogram;
  /** lora_requests_info: every label combination seen keeps its last timestamp (label key → [labels, ts]). */
  private readonly loraSeries = new Map<string, [Record<string, string>, number]>();
  /** The last page, UTF-8, and what it was rendered from (engine version, max_tokens observations). */
  private cached: Buffer | null = null;
  private cachedEngineVersion = -1;
  private cachedMaxTokensCount = -1;
  private maxTokensCount = 0;

  constructor(private readonly cfg: MetricsConfig) {
    this.labels = { engine: '0', model_name: cfg.modelName };
    this.maxTokensHist = new Histogram(build125Buckets(cfg.maxModelLen));
  }

  /** The max_tokens the request runs with (vLLM observes SamplingParams.max_tokens). */
  observeMaxTokens(maxTokens: number): void {
    this.maxTokensHist.observe(maxTokens);
    this.maxTokensCount++;
  }

  /** The page for a scrape: rendered again only when the engine or the max_tokens histogram changed since. */
  page(engine: { readonly version: number; stats(): EngineStats }): Buffer {
    if (this.cached === null || engine.version !== this.cachedEngineVersion || this.maxTokensCount !== this.cachedMaxTokensCount) {
      this.cachedEngineVersion = engine.version;
      this.cachedMaxTokensCount = this.maxTokensCount;
      this.cached = Buffer.from(this.render(engine.stats()), 'utf8');
    }
    return this.cached;
  }

  render(s: EngineStats): string {
    const w = new PromWriter();
    const L = this.labels;
    const c = this.createdSeconds;
    const one = (v: number): Series => [[L, v]];
    const legacy = this.cfg.legacyMetrics;
    const h = s.histograms;
    w.gauge('vllm:num_requests_running', 'Number of requests in model execution batches.', one(s.running));
    w.gauge('vllm:num_requests_waiting', 'Number of requests waiting to be processed.', one(s.waiting));
    if (legacy) w.gauge('vllm:gpu_cache_usage_perc', 'GPU KV-cache usage. 1 means 100 percent usage.(DEPRECATED. Use vllm:kv_cache_usage_perc instead.)', one(s.kv_cache_usage_perc));
    w.gauge('vllm:kv_cache_usage_perc', 'KV-cache usage. 1 means 100 percent usage.', one(s.kv_cache_usage_perc));
    if (legacy) {
      w.counter('vllm:gpu_prefix_cache_queries', 'GPU prefix cache queries, in terms of number of queried tokens.(DEPRECATED. Use vllm:prefix_cache_queries instead.)', one(s.prefix_cache_queries_total), c);
      w.counter('vllm:gpu_prefix_cache_hits', 'GPU prefix cache hits, in terms of number of cached tokens.(DEPRECATED. Use vllm:prefix_cache_hits instead.)', one(s.prefix_cache_hits_total), c);
    }
    w.counter('vllm:prefix_cache_queries', 'Prefix cache queries, in terms of number of queried tokens.', one(s.prefix_cache_queries_total), c);
    w.counter('vllm:prefix_cache_hits', 'Prefix cache hits, in terms of number of cached tokens.', one(s.prefix_cache_hits_total), c);
    w.counter('vllm:num_preemptions', 'Cumulative number of preemption from the engine.', one(s.num_preemptions_total), c);
    w.counter('vllm:prompt_tokens', 'Number of prefill tokens processed.', one(s.prompt_tokens_total), c);
    w.counter('vllm:generation_tokens', 'Number of generation tokens processed.', one(s.generation_tokens_total), c);
    const success: Series = (['stop', 'length', 'abort'] as const).map((r) => [{ ...L, finished_reason: r }, s.request_success_total[r]]);
    w.counter('vllm:request_success', 'Count of successfully processed requests.', success, c);
    w.histogram('vllm:request_prompt_tokens', 'Number of prefill tokens processed.', L, h.request_prompt_tokens, c);
    w.histogram('vllm:request_generation_tokens', 'Number of generation tokens processed.', L, h.request_generation_tokens, c);
    w.histogram('vllm:iteration_tokens_total', 'Histogram of number of tokens per engine_step.', L, h.iteration_tokens_total, c);
    w.histogram('vllm:request_params_max_tokens', 'Histogram of the max_tokens request parameter.', L, this.maxTokensHist.snapshot(), c);
    w.histogram('vllm:time_to_first_token_seconds', 'Histogram of time to first token in seconds.', L, h.time_to_first_token_seconds, c);
    if (legacy) w.histogram('vllm:time_per_output_token_seconds', 'Histogram of time per output token in seconds.DEPRECATED: Use vllm:inter_token_latency_seconds instead.', L, h.inter_token_latency_seconds, c);
    w.histogram('vllm:inter_token_latency_seconds', 'Histogram of inter-token latency in seconds.', L, h.inter_token_latency_seconds, c);
    w.histogram('vllm:request_time_per_output_token_seconds', 'Histogram of time_per_output_token_seconds per request.', L, h.request_time_per_output_token_seconds, c);
    w.histogram('vllm:e2e_request_latency_seconds', 'Histogram of e2e request latency in seconds.', L, h.e2e_request_latency_seconds, c);
    w.histogram('vllm:request_queue_time_seconds', 'Histogram of time spent in WAITING phase for request.', L, h.request_queue_time_seconds, c);
    w.histogram('vllm:request_inference_time_seconds', 'Histogram of time spent in RUNNING phase for request.', L, h.request_inference_time_seconds, c);
    w.histogram('vllm:request_prefill_time_seconds', 'Histogram of time spent in PREFILL phase for request.', L, h.request_prefill_time_seconds, c);
    w.histogram('vllm:request_decode_time_seconds', 'Histogram of time spent in DECODE phase for request.', L, h.request_decode_time_seconds, c);
    w.gauge('vllm:cache_config_info', 'Information of the LLMEngine CacheConfig', [[this.cacheConfigLabels(), 1]]);
    if (this.cfg.loraEnabled) w.gauge('vllm:lora_requests_info', 'Running stats on lora requests.', this.loraInfo(s));
    return w.text();
  }

  private cacheConfigLabels(): Record<string, string> {
    return {
      block_size: String(this.cfg.blockSize), cache_dtype: 'auto', calculate_kv_scales: 'False', cpu_offload_gb: '0',
      enable_prefix_caching: 'True', engine: '0', gpu_memory_utilization: '0.9', is_attention_free: 'False',
      num_cpu_blocks: 'None', num_gpu_blocks: String(this.cfg.numGpuBlocks), num_gpu_blocks_override: 'None',
      prefix_caching_hash_algo: 'sha256', sliding_window: 'None', swap_space: '4',
    };
  }

  /**
   * Refreshed when the page is rendered, which is after any step or change (vLLM refreshes it per step, so an
   * idle replica's timestamp stands still there too); consumers take the series with the largest value.
   */
  private loraInfo(s: EngineStats): Series {
    const labels = {
      max_lora: String(s.lora.max_lora),
      running_lora_adapters: s.lora.running_lora_adapters.join(','),
      waiting_lora_adapters: s.lora.waiting_lora_adapters.join(','),
    };
    this.loraSeries.set(`${labels.running_lora_adapters}|${labels.waiting_lora_adapters}`, [labels, Date.now() / 1000]);
    return [...this.loraSeries.values()];
  }
}
