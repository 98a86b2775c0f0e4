// The engine's counters and histograms, updated at the points vLLM updates them (docs/vllm-facts.md "Metrics"):
// TTFT and ITL per sampled token, prompt tokens at the first token, prefix-cache queries per admission,
// per-request latencies when the request finishes, iteration tokens per step.
// Thread: main of the mock process. Hot path: tokenSampled runs per generated token (one histogram observe,
// none when the engine was built without histograms: EngineOptions.histograms).
import type { EngineRequest } from './engine-request.ts';
import { EngineHistograms, type EngineCounters, type EngineStats } from './stats.ts';

export class StatsRecorder {
  readonly hist: EngineHistograms;
  /** Observe the histograms (EngineOptions.histograms); false leaves them empty, decided at construction. */
  private readonly observe: boolean;
  preemptions = 0;
  aborted = 0;
  completed = 0;
  /** Engine steps run. */
  steps = 0;
  private promptTokensTotal = 0;
  private generationTokensTotal = 0;
  private prefixQueries = 0;
  private prefixHits = 0;
  private readonly success = { stop: 0, length: 0, abort: 0 };

  constructor(maxModelLen: number, observe = true) {
    this.hist = new EngineHistograms(maxModelLen);
    this.observe = observe;
  }

  admitted(queryTokens: number, hitTokens: number): void {
    this.prefixQueries += queryTokens;
    this.prefixHits += hitTokens;
  }

  stepEnded(iterationTokens: number): void {
    this.steps++;
    if (this.observe) this.hist.iterationTokens.observe(iterationTokens);
  }

  /** Call after req.numOutputTokens was incremented and before req.lastTokenMs is moved to `endMs`. */
  tokenSampled(req: EngineRequest, endMs: number): void {
    this.generationTokensTotal++;
    if (req.numOutputTokens === 1) {
      this.promptTokensTotal += req.promptTokens;
      if (this.observe) this.hist.ttft.observe(Math.max(0, endMs - req.arrivalMs) / 1000);
    } else if (this.observe) {
      this.hist.itl.observe((endMs - req.lastTokenMs) / 1000);
    }
  }

  finished(req: EngineRequest, reason: 'stop' | 'length' | 'abort', endMs: number): void {
    const h = this.hist;
    this.success[reason]++;
    if (reason === 'abort') this.aborted++;
    else this.completed++;
    if (!this.observe) return;
    h.e2e.observe(Math.max(0, endMs - req.arrivalMs) / 1000);
    h.promptTokens.observe(req.promptTokens);
    h.generationTokens.observe(req.numOutputTokens);
    if (!req.firstTokenSampled) return;
    h.queue.observe((req.firstScheduledMs - req.arrivalMs) / 1000);
    h.prefill.observe(Math.max(0, req.firstTokenMs - req.firstScheduledMs) / 1000);
    h.decode.observe((req.lastTokenMs - req.firstTokenMs) / 1000);
    h.inference.observe(Math.max(0, req.lastTokenMs - req.firstScheduledMs) / 1000);
    if (req.numOutputTokens > 1) h.tpot.observe((req.lastTokenMs - req.firstTokenMs) / 1000 / (req.numOutputTokens - 1));
  }

  stats(running: number, waiting: number, kvCacheUsage: number, lora: EngineStats['lora']): EngineStats {
    return { ...this.counters(running, waiting, kvCacheUsage, lora), histograms: this.hist.snapshot() };
  }

  /** The gauges and counters without the histograms (whose snapshot copies every bucket): a scrape that reads no histogram. */
  counters(running: number, waiting: number, kvCacheUsage: number, lora: EngineStats['lora']): EngineCounters {
    return {
      running,
      waiting,
      kv_cache_usage_perc: kvCacheUsage,
      num_preemptions_total: this.preemptions,
      prompt_tokens_total: this.promptTokensTotal,
      generation_tokens_total: this.generationTokensTotal,
      request_success_total: { ...this.success },
      prefix_cache_queries_total: this.prefixQueries,
      prefix_cache_hits_total: this.prefixHits,
      lora,
    };
  }
}
