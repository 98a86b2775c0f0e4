// What a replica of one pool costs, as the kv-aware router predicts it: the decode step at a batch size and
// KV context (a linear model from the pool's `engine` config, calibrated on the mock engine's profiles), the
// configured prefill rate (the starting point of each replica's learned rate), adapter load time and the
// TPOT target. Built once per pool at setup. Thread: the acceptor. Hot path: stepMs is three multiply-adds.
import type { PoolConfig } from '../config/schema.ts';

export class EngineModel {
  readonly poolId: string;
  readonly blockSize: number;
  readonly prefillTokensPerSecond: number;
  readonly adapterLoadMs: number;
  readonly tpotTargetMs: number;
  readonly ttftTargetMs: number;
  private readonly baseMs: number;
  private readonly perSeqMs: number;
  private readonly perKvTokenMs: number;

  constructor(pool: Pick<PoolConfig, 'id' | 'block_size' | 'engine'>) {
    const e = pool.engine;
    this.poolId = pool.id;
    this.blockSize = pool.block_size;
    this.prefillTokensPerSecond = e.prefill_tokens_per_second;
    this.adapterLoadMs = e.adapter_load_ms;
    this.tpotTargetMs = e.tpot_target_ms;
    this.ttftTargetMs = e.ttft_target_ms;
    this.baseMs = e.decode_base_ms;
    this.perSeqMs = e.decode_per_seq_ms;
    this.perKvTokenMs = e.decode_per_1k_kv_tokens_ms / 1000;
  }

  /** One decode step with `batch` running sequences holding `kvTokens` tokens of context in all. */
  stepMs(batch: number, kvTokens: number): number {
    return this.baseMs + this.perSeqMs * batch + this.perKvTokenMs * kvTokens;
  }
}
