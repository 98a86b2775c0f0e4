// kv-aware's fit test: a candidate fits when, with this request added, its KV use stays at or below
// 1 − admission.headroom_ratio, its predicted TPOT (the scorer's stepMs: decode step / (1 − ρ)) stays within
// the TPOT limit (admission.tpot_margin applied per pool: PoolFigures.tpotLimitMs), its predicted TTFT for
// this request stays the TTFT limit (ttftLimitMs: admission.ttft_margin × the request's budget, at least its own TTFT there ×
// 1.05; the budget is the scorer's budgetMs: its tier's, or 1.25 × its idle TTFT for long prompts),
// so kv-aware fits exactly what admission admits (src/admission/gpu-fit.ts), this gateway holds fewer than
// upstream.connections_per_replica requests there, and its prefill would push none of the streams there past
// their own TPOT target (t.harm, the model's per-stream slack, src/gpu-time/stream-slack.ts): the batch's mean
// TPOT hides the short streams, which have few gaps to spread a 2k-token prompt's ~170 ms stall over. When
// every replica would harm one, the request does not fit anywhere: admission queues it until those streams
// end when that is within its allowance, else sheds it at arrival (on the Azure code trace at 26 requests/s,
// admitted requests met their SLO 92-93 % of the time without it, 99 % with it). A candidate
// that does not fit is chosen only when none does (the decision then says fits = false; admission queues).
// Unknown KV (num_gpu_blocks not scraped) does not count against a candidate.
// Thread: the acceptor. Hot path: O(candidates) comparisons.
import type { CandidateTable } from '../candidate-table.ts';

/** A request whose own TTFT alone passes its budget may still go where the queue adds at most this share. */
export const OWN_TTFT_SLACK = 1.05;

/**
 * The TTFT a request may be predicted on a replica and still be admitted there: `margin` of its budget, the
 * share the model's error and later arrivals leave; at least its own TTFT there × OWN_TTFT_SLACK, so that a
 * request whose own prefill takes most of its budget (a long prompt) is served where nothing is queued
 * ahead of it, and only there: under overload the pool's GPU time goes to the requests it can serve in time.
 */
export function ttftLimitMs(ownMs: number, budgetMs: number, margin: number): number {
  const limit = margin * budgetMs;
  const own = OWN_TTFT_SLACK * ownMs;
  return own > limit ? own : limit;
}

export class HeadroomFilter {
  readonly name = 'headroom-filter';
  private readonly maxKvUse: number;
  private readonly connectionsPerReplica: number;

  constructor(headroomRatio: number, connectionsPerReplica: number) {
    this.maxKvUse = 1 - headroomRatio;
    this.connectionsPerReplica = connectionsPerReplica;
  }

  mark(t: CandidateTable, tpotLimitMs: number, ttftMargin = 1): void {
    for (let i = 0; i < t.n; i++) {
      t.fits[i] = t.kvAfter[i]! > this.maxKvUse || t.stepMs[i]! > tpotLimitMs || t.ttftMs[i]! > ttftLimitMs(t.ownTtftMs[i]!, t.budgetMs[i]!, ttftMargin) ||
        t.inflight[i]! >= this.connectionsPerReplica || t.harm[i]! > 0 ? 0 : 1;
    }
  }
}
