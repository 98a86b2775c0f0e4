// The mock engine's contract: the I/O-free core that the mock's HTTP server drives in real time and a fleet
// simulator can drive in virtual time. Thread: main (of the mock process). Additive changes only.

/** Time source and timer service. RealClock uses performance.now()/setTimeout; VirtualClock advances by hand. */
export interface Clock {
  /** Milliseconds, monotonic. */
  now(): number;
  /** Calls fn once after `delayMs` of this clock's time. */
  setTimer(delayMs: number, fn: () => void): unknown;
  clearTimer(handle: unknown): void;
}

export type ProfileName = 'llama-8b-a100' | 'llama-70b-tp2-a100' | 'tiny';

export interface EngineOptions {
  profile: ProfileName;
  /** Overrides of the profile's defaults (flags of `npm run mock`). */
  numGpuBlocks?: number;
  blockSize?: number;
  maxNumSeqs?: number;
  maxNumBatchedTokens?: number;
  maxLoras?: number;
  /** Adapters present at start. */
  loras?: string[];
  /** 1 = real time; 0.1 = every step takes a tenth of the profile's time. In (0, 1]. */
  timeScale?: number;
  /**
   * An engine that differs from its profile (the fleet simulator, so that no router predicts it exactly):
   * each step-time parameter drawn once within ±errorPct % of the profile's, and each step's duration
   * scaled by a fresh draw within ±jitterPct %; both from `seed`. Absent: the profile's figures, no noise.
   */
  stepTimeNoise?: StepTimeNoise;
  /**
   * Decode-only steps are costed as the CUDA-graph batch vLLM pads them to (profiles.ts cudaGraphBatch).
   * Default false: the profile's figures for the batch as scheduled.
   */
  cudaGraphPadding?: boolean;
  /**
   * false: the engine observes none of its histograms (stats() reports them empty; counters and gauges are
   * kept). A fleet simulator reads only counters(), and an observe per sampled token and nine per finished
   * request were a tenth of a round-robin run's CPU. Default true (the HTTP mock's /metrics needs them).
   */
  histograms?: boolean;
}

export interface StepTimeNoise {
  errorPct: number;
  jitterPct: number;
  seed: number;
  /**
   * A draw shared by every engine given the same biasSeed: each step-time parameter × one factor within
   * ±biasPct % (how wrong a fleet's nominal figures are, for every replica of one GPU type at once), applied
   * before the engine's own ±errorPct % draw. Absent or 0: none.
   */
  biasPct?: number;
  biasSeed?: number;
}

export interface EngineRequestSpec {
  /** Unique id (the completion id's base). */
  id: string;
  /** Prompt length in tokens. */
  promptTokens: number;
  /** Chained hashes of the prompt's full blocks (src/tokenize/block-hash.ts), adapter already keyed in. */
  blockHashes: ArrayLike<number>;
  /** How many tokens this request will generate before finishing (decided by the HTTP layer). */
  outputTokens: number;
  /** finish_reason once outputTokens are generated: 'length' when it equals max_tokens, else 'stop'. */
  finishReason: 'stop' | 'length';
  /** LoRA adapter name, or null for the base model. */
  adapter: string | null;
  /**
   * Hashes of the blocks after the prompt's full blocks (index 0 = block floor(promptTokens / blockSize)),
   * over the prompt's tail and the generated tokens' ids, chained from the last prompt hash: a block filled by
   * generated tokens is cached under these, so a follow-up prompt carrying the reply hits it, as in vLLM.
   * Needs blockHashes to cover every full prompt block. Absent (e.g. a simulator with no token ids), or for
   * blocks past its end: synthetic hashes salted per request, which only that request's recompute can hit.
   */
  outputBlockHashes?: ArrayLike<number>;
  /**
   * The sequence's token ids: the prompt's, then the planned output's (tokenIds[i] is token i), so that a KV
   * event can carry each cached block's tokens as vLLM's BlockStored does. Absent: events carry none.
   */
  tokenIds?: ArrayLike<number>;
  /**
   * A slow replica (the mock's `slow` fault): the scheduler leaves this request out of every step that starts
   * less than this many ms after its previous token (the first: after it arrived), so each token comes that
   * much later and the request stays in the engine, holding its blocks, for as long as its stream runs, as on
   * a GPU that is slow. Absent or 0: never held.
   */
  tokenDelayMs?: number;
}

/**
 * Told of every change to the prefix cache, with the context vLLM's KV events carry (MockEngine.setBlockEvents).
 * One call per block cached or evicted while set.
 */
export interface EngineBlockEvents {
  /**
   * A block entered the prefix cache under `hash`: block `index` of a request's sequence, chained from
   * `parentHash` (null for block 0); its tokens are tokens[index·blockSize, (index+1)·blockSize) when tokens
   * is not null.
   */
  stored(hash: number, parentHash: number | null, tokens: ArrayLike<number> | null, index: number, adapter: string | null): void;
  /** The block cached under `hash` was evicted (its block reallocated). */
  removed(hash: number): void;
}

export interface EngineRequestEvents {
  /** Prefill finished and the first token was sampled in this step. Precedes onToken(0). */
  onFirstToken(info: { cachedTokens: number }): void;
  /** Token `index` (0-based) was sampled. Called once per generated token, in order, at step ends. */
  onToken(index: number): void;
  /** The request left the engine: finished normally or aborted. Called exactly once. */
  onFinish(reason: 'stop' | 'length' | 'abort'): void;
}

export type RequestPhase = 'waiting' | 'running' | 'finished' | 'aborted' | 'preempted';

export interface EngineSnapshot {
  running: number;
  waiting: number;
  free_blocks: number;
  total_blocks: number;
  cached_blocks: number;
  preemptions: number;
  aborted: number;
  completed: number;
  loaded_adapters: string[];
  /** The last 1,000 requests, newest last. */
  requests: Array<{ id: string; state: RequestPhase; adapter: string | null; prompt_tokens: number; cached_tokens: number; output_tokens: number }>;
}

/** The engine's resolved limits (profile defaults with EngineOptions overrides applied). */
export interface EngineConfig {
  profile: ProfileName;
  numGpuBlocks: number;
  blockSize: number;
  maxNumSeqs: number;
  maxNumBatchedTokens: number;
  maxLoras: number;
  /** Longest promptTokens + outputTokens accepted: the profile's, capped by the pool's (numGpuBlocks − 1) · blockSize. */
  maxModelLen: number;
  timeScale: number;
}

export type { EngineStats, HistogramSnapshot } from './stats.ts';
