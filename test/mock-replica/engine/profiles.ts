// Engine profiles (KV pool size, scheduler limits) and the step-time model that turns one scheduled batch into
// a duration. Calibrated to docs/vllm-facts.md "Calibration" (A100-80GB, Llama-3.1 8B and 70B TP2); the unit test
// test/unit/mock-engine/profiles.test.ts checks the TTFT and TPOT tables there within their stated ranges.
// Thread: main of the mock process. Hot path: stepDurationMs runs once per engine step (a few multiplies).
//
// Model, per step (milliseconds, before EngineOptions.timeScale):
//   fixedMs                                  CPU scheduling + launch overhead (CUDA graphs)
// + weightReadMs                             every step streams all weights once (+ TP all-reduce for 70B)
// + kvReadMsPer1kTokens * contextTokens/1k   KV of every scheduled sequence's computed context is read
// + perSeqMs * scheduledSeqs                 sampling and the decode compute not hidden behind memory traffic
// + (prefillTokens + attentionCoef * Σ(b² − a²)) / prefillTokensPerMs
//                                            prefill compute; the causal-attention term (2·n²·d·L FLOPs over a
//                                            prompt, in "equivalent tokens") matters only for long prompts
// + adapterLoadMs * adaptersLoaded           a LoRA adapter moved into a GPU slot this step
import type { EngineConfig, EngineOptions, ProfileName } from './types.ts';
import type { SeededRandom } from '../../../src/router/seeded-random.ts';

export interface EngineProfile {
  readonly name: ProfileName;
  readonly description: string;
  readonly numGpuBlocks: number;
  readonly blockSize: number;
  readonly maxNumSeqs: number;
  readonly maxNumBatchedTokens: number;
  /** vLLM's --max-loras default is 1. */
  readonly maxLoras: number;
  /** Longest prompt + output accepted; clamped to the KV pool's capacity at engine construction. */
  readonly maxModelLen: number;
  readonly fixedMs: number;
  readonly weightReadMs: number;
  readonly kvReadMsPer1kTokens: number;
  readonly perSeqMs: number;
  readonly prefillTokensPerSecond: number;
  /** Equivalent prefill tokens per unit of (b² − a²) for a chunk covering positions a..b: 2·d·L / FLOPs per token. */
  readonly attentionCoef: number;
  readonly adapterLoadMs: number;
}

export const PROFILES: Readonly<Record<ProfileName, EngineProfile>> = {
  'llama-8b-a100': {
    name: 'llama-8b-a100',
    description: 'Llama-3.1-8B bf16 on 1x A100-80GB, gpu_memory_utilization 0.9',
    numGpuBlocks: 27_648, // 54-55 GiB of KV at 2 MiB per block; the sample cache_config_info says 27648
    blockSize: 16,
    maxNumSeqs: 256, // A100 gets the small defaults (PR #17885)
    maxNumBatchedTokens: 2048,
    maxLoras: 1,
    maxModelLen: 131_072,
    fixedMs: 0.5,
    weightReadMs: 10, // 16.06 GB at ~1.6 TB/s effective
    kvReadMsPer1kTokens: 0.085, // 128 KiB per token
    perSeqMs: 0.025, // fitted so batch 256 at 1.5k context lands in the 45-55 ms row
    prefillTokensPerSecond: 12_000, // 11-14k tok/s
    attentionCoef: (2 * 4096 * 32) / 14e9, // d=4096, L=32, 14 GFLOP per token
    adapterLoadMs: 40,
  },
  'llama-70b-tp2-a100': {
    name: 'llama-70b-tp2-a100',
    description: 'Llama-3.1-70B bf16, tensor parallel 2 on 2x A100-80GB, gpu_memory_utilization 0.9',
    numGpuBlocks: 1_500, // 3-4 GiB of KV per GPU at 2.5 MiB per block per GPU
    blockSize: 16,
    maxNumSeqs: 256,
    maxNumBatchedTokens: 2048,
    maxLoras: 1,
    maxModelLen: 16_384, // the default 131072 does not fit: deployments run --max-model-len 8k-32k
    fixedMs: 0.5,
    weightReadMs: 48, // 70.6 GB per GPU at 1.6 TB/s = 44 ms, plus 3-5 ms of all-reduce
    kvReadMsPer1kTokens: 0.1, // 160 KiB per token per GPU
    perSeqMs: 0.06,
    prefillTokensPerSecond: 2_400, // 2.0-2.6k tok/s
    attentionCoef: (2 * 8192 * 80) / 140e9,
    adapterLoadMs: 80,
  },
  tiny: {
    name: 'tiny',
    description: 'a small fast engine for tests: 256 blocks, ~1 ms decode steps',
    numGpuBlocks: 256,
    blockSize: 16,
    maxNumSeqs: 16,
    maxNumBatchedTokens: 256,
    maxLoras: 1,
    maxModelLen: 2048,
    fixedMs: 0.2,
    weightReadMs: 0.8,
    kvReadMsPer1kTokens: 0.01,
    perSeqMs: 0.01,
    prefillTokensPerSecond: 100_000,
    attentionCoef: 0,
    adapterLoadMs: 5,
  },
};

/** What one step schedules, summed by the scheduler while it builds the batch. */
export interface BatchShape {
  /** Sequences scheduled in this step (decodes and prefill chunks). */
  scheduledSeqs: number;
  /** Σ over scheduled sequences of their already-computed tokens (the KV the step reads). */
  contextTokens: number;
  /** Tokens computed as prefill (prompt chunks, and recompute after preemption). */
  prefillTokens: number;
  /** Σ over prefill chunks covering positions a..b of (b² − a²). */
  attentionSquares: number;
  /** Adapters that had to be moved into a GPU LoRA slot for this step. */
  adaptersLoaded: number;
}

/**
 * Largest batch vLLM captures a CUDA graph for by default (max_cudagraph_capture_size = min(2 × max_num_seqs,
 * 512)); the capture sizes are 1, 2, 4, then multiples of 8 (docs/vllm-facts.md "CUDA graphs").
 */
export const CUDA_GRAPH_MAX_CAPTURE = 512;

/**
 * The batch a decode step of `seqs` sequences runs as: the smallest CUDA-graph capture size ≥ seqs (1, 2, 4,
 * then the next multiple of 8, up to 512); larger batches run eagerly, unpadded. The padded rows are computed
 * and thrown away, so they cost what a sequence costs (perSeqMs) but read no KV.
 */
export function cudaGraphBatch(seqs: number): number {
  if (seqs <= 2 || seqs > CUDA_GRAPH_MAX_CAPTURE) return seqs;
  if (seqs <= 4) return 4;
  return (seqs + 7) & ~7;
}

/**
 * Step duration in profile milliseconds (multiply by the time scale to get clock milliseconds). `pad`: a
 * decode-only step is costed as its CUDA-graph batch (cudaGraphBatch), as vLLM runs it.
 */
export function stepDurationMs(p: EngineProfile, b: BatchShape, pad = false): number {
  if (b.scheduledSeqs === 0) return 0;
  const prefillMs = ((b.prefillTokens + p.attentionCoef * b.attentionSquares) * 1000) / p.prefillTokensPerSecond;
  const seqs = pad && b.prefillTokens === 0 ? cudaGraphBatch(b.scheduledSeqs) : b.scheduledSeqs;
  return p.fixedMs + p.weightReadMs
    + (p.kvReadMsPer1kTokens * b.contextTokens) / 1000
    + p.perSeqMs * seqs
    + prefillMs
    + p.adapterLoadMs * b.adaptersLoaded;
}

/**
 * The profile with every step-time parameter multiplied by its own draw from [1 − errorPct/100, 1 + errorPct/100]
 * (uniform, from `rng`, in a fixed order so the same seed gives the same engine). Capacity figures (blocks,
 * limits) are kept: only how long the GPU takes is off.
 */
export function perturbedProfile(p: EngineProfile, errorPct: number, rng: SeededRandom): EngineProfile {
  const e = errorPct / 100;
  const f = (): number => 1 + e * (2 * rng.next() - 1);
  return Object.freeze({
    ...p,
    fixedMs: p.fixedMs * f(),
    weightReadMs: p.weightReadMs * f(),
    kvReadMsPer1kTokens: p.kvReadMsPer1kTokens * f(),
    perSeqMs: p.perSeqMs * f(),
    prefillTokensPerSecond: p.prefillTokensPerSecond * f(),
    attentionCoef: p.attentionCoef * f(),
    adapterLoadMs: p.adapterLoadMs * f(),
  });
}

/** Decode step with `batch` sequences of `contextTokens` each (the TPOT a client sees in steady state). */
export function decodeStepMs(p: EngineProfile, batch: number, contextTokens: number): number {
  return stepDurationMs(p, {
    scheduledSeqs: batch, contextTokens: batch * contextTokens, prefillTokens: 0, attentionSquares: 0, adaptersLoaded: 0,
  });
}

/** Idle-engine TTFT of a lone `promptTokens` prompt: its prefill split into max_num_batched_tokens chunks. */
export function idlePrefillMs(p: EngineProfile, promptTokens: number, maxNumBatchedTokens = p.maxNumBatchedTokens): number {
  let totalMs = 0;
  for (let a = 0; a < promptTokens; a += maxNumBatchedTokens) {
    const b = Math.min(promptTokens, a + maxNumBatchedTokens);
    totalMs += stepDurationMs(p, {
      scheduledSeqs: 1, contextTokens: a, prefillTokens: b - a, attentionSquares: b * b - a * a, adaptersLoaded: 0,
    });
  }
  return totalMs;
}

/** Profile defaults with the options' overrides applied and checked; throws RangeError on a bad value. */
export function resolveConfig(opts: EngineOptions): EngineConfig {
  const profile = PROFILES[opts.profile];
  if (!profile) throw new RangeError(`unknown profile ${String(opts.profile)}`);
  const int = (name: string, v: number | undefined, dflt: number, min: number): number => {
    const x = v ?? dflt;
    if (!Number.isInteger(x) || x < min) throw new RangeError(`${name} must be an integer >= ${min}, got ${x}`);
    return x;
  };
  const numGpuBlocks = int('numGpuBlocks', opts.numGpuBlocks, profile.numGpuBlocks, 2);
  const blockSize = int('blockSize', opts.blockSize, profile.blockSize, 1);
  const timeScale = opts.timeScale ?? 1;
  if (!(timeScale > 0 && timeScale <= 1)) throw new RangeError(`timeScale must be in (0, 1], got ${timeScale}`);
  const noise = opts.stepTimeNoise;
  const bias = noise?.biasPct ?? 0;
  if (noise && !(noise.errorPct >= 0 && noise.errorPct < 100 && noise.jitterPct >= 0 && noise.jitterPct < 100 && bias >= 0 && bias < 100)) {
    throw new RangeError(`stepTimeNoise percentages must be in [0, 100), got ${noise.errorPct}, ${noise.jitterPct} and ${bias}`);
  }
  return Object.freeze({
    profile: profile.name,
    numGpuBlocks,
    blockSize,
    maxNumSeqs: int('maxNumSeqs', opts.maxNumSeqs, profile.maxNumSeqs, 1),
    maxNumBatchedTokens: int('maxNumBatchedTokens', opts.maxNumBatchedTokens, profile.maxNumBatchedTokens, 1),
    maxLoras: int('maxLoras', opts.maxLoras, profile.maxLoras, 1),
    // vLLM refuses to start when max_model_len does not fit the pool; the mock clamps instead.
    maxModelLen: Math.min(profile.maxModelLen, (numGpuBlocks - 1) * blockSize),
    timeScale,
  });
}
