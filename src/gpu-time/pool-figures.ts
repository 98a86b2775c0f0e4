// A pool's nominal engine figures, from its `engine` config: the decode step as a linear function of the
// batch and the KV context it reads, the prefill rate with causal attention's quadratic term, the scheduler's
// token budget per step, adapter load time and the TPOT/TTFT targets. Each replica's learned figures start
// here (src/gpu-time/README.md). Built once per pool at setup and on reload.
// Thread: the acceptor. Hot path: stepMs and work are a few multiply-adds.
import type { PoolConfig } from '../config/schema.ts';

/** Decode-step parameters are kept in these units, so that every feature of the fit is of order 1 under load. */
export const BATCH_UNIT = 64;
export const KV_UNIT_TOKENS = 100_000;

export class PoolFigures {
  readonly poolId: string;
  readonly blockSize: number;
  /** Prefill tokens per millisecond on an idle replica. */
  readonly prefillTokensPerMs: number;
  readonly baseMs: number;
  readonly perSeqMs: number;
  readonly perKvTokenMs: number;
  readonly maxBatchedTokens: number;
  readonly attentionCoef: number;
  readonly adapterLoadMs: number;
  readonly tpotTargetMs: number;
  readonly ttftTargetMs: number;

  constructor(pool: Pick<PoolConfig, 'id' | 'block_size' | 'engine'>) {
    const e = pool.engine;
    this.poolId = pool.id;
    this.blockSize = pool.block_size;
    this.prefillTokensPerMs = e.prefill_tokens_per_second / 1000;
    this.baseMs = e.decode_base_ms;
    this.perSeqMs = e.decode_per_seq_ms;
    this.perKvTokenMs = e.decode_per_1k_kv_tokens_ms / 1000;
    this.maxBatchedTokens = e.max_num_batched_tokens;
    this.attentionCoef = e.prefill_attention_coef;
    this.adapterLoadMs = e.adapter_load_ms;
    this.tpotTargetMs = e.tpot_target_ms;
    this.ttftTargetMs = e.ttft_target_ms;
  }

  /** The nominal decode step with `batch` sequences reading `kvTokens` of context. */
  stepMs(batch: number, kvTokens: number): number {
    return this.baseMs + this.perSeqMs * batch + this.perKvTokenMs * kvTokens;
  }

  /** Equivalent prefill tokens of computing prompt positions a..b (the tokens plus their attention's square term). */
  work(a: number, b: number): number {
    return b - a + this.attentionCoef * (b * b - a * a);
  }

  /**
   * TTFT of a lone prompt on an idle replica of nominal figures: its uncached part in chunks of the token
   * budget, each step costing the fixed decode cost at batch 1, the context it reads and its prefill work.
   */
  idleTtftMs(promptTokens: number, cachedTokens = 0): number {
    const chunk = this.maxBatchedTokens;
    let ms = 0;
    for (let a = cachedTokens < promptTokens ? cachedTokens : promptTokens - 1; a < promptTokens; a += chunk) {
      const b = a + chunk < promptTokens ? a + chunk : promptTokens;
      ms += this.stepMs(1, a) + this.work(a, b) / this.prefillTokensPerMs;
    }
    return ms;
  }
}
