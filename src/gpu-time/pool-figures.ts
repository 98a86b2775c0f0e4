// A pool's nominal engine figures, from its `engine` config: the decode step as a linear function of the
// batch and the KV context it reads, the prefill rate with causal attention's quadratic term, the scheduler's
// token budget per step, adapter load time and the TPOT/TTFT targets. Each replica's learned figures start
// here (src/gpu-time/README.md). Built once per pool at setup and on reload.
// Thread: the acceptor. Hot path: stepMs and work are a few multiply-adds.
import type { PoolConfig } from '../config/schema.ts';

/** Decode-step parameters are kept in these units, so that every feature of the fit is of order 1 under load. */
export const BATCH_UNIT = 64;
export const KV_UNIT_TOKENS = 100_000;

/**
 * The engine the TPOT margins (admission.tpot_margin, STREAM_TPOT_MARGIN) were tuned on: the seed fleet's 8B
 * pool (the schema's engine defaults), idle decode step 10.5 + 0.025 ms at batch 1 with no context, both in the
 * simulator on seed 1 (tpot_margin on the seed mix: src/admission/README.md, "Tiers and margins";
 * STREAM_TPOT_MARGIN on the Azure trace: src/gpu-time/README.md, "Parameters"). A margin is applied as the share of the headroom between the idle step and the target that
 * it leaves on that engine (tpotLimitMs), so it keeps its tuned value there and no pool's target, however
 * close to its own idle step, is put out of reach by it.
 */
const TUNED_IDLE_STEP_MS = 10.525;

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

  /**
   * The TPOT a prediction is held to under `margin` (a share of the target): the pool's idle step (batch 1, no
   * context) plus the share of its headroom up to the target that `margin` leaves on the tuned engine,
   *   share = (margin × target − TUNED_IDLE_STEP_MS) / (target − TUNED_IDLE_STEP_MS), at least 0,
   * so margin × target exactly on the 8B figures (30 ms of 50 at 0.6), and 48.6 + 0.49 × 1.4 = 49.3 ms on
   * the demo's 70B pool (idle step 48.56 ms) where margin × target (30 ms) is below what an idle replica
   * does. A target at or below the idle step leaves no headroom: the limit is the idle step itself.
   */
  tpotLimitMs(margin: number): number {
    const idle = this.stepMs(1, 0);
    const target = this.tpotTargetMs;
    if (!(target > idle)) return idle;
    const share = target > TUNED_IDLE_STEP_MS ? (margin * target - TUNED_IDLE_STEP_MS) / (target - TUNED_IDLE_STEP_MS) : margin;
    return idle + (share > 0 ? share : 0) * (target - idle);
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
