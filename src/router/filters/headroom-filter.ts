// kv-aware's fit test: a candidate fits when, with this request added, its KV use stays at or below
// 1 − admission.headroom_ratio, this gateway holds fewer than upstream.connections_per_replica requests there,
// and admission's GPU-time rule passes it (t.gpuFits, from the scorer: src/admission/gpu-fit.ts): its
// predicted TTFT within the TTFT limit (ttftLimitMs below), its predicted TPOT within the pool's TPOT limit
// (at least what an idle replica reaches for it), no stream there pushed past its own TPOT target by this
// request's prefill (the model's per-stream slack, src/gpu-time/stream-slack.ts: the batch's mean TPOT hides
// the short streams, which have few gaps to spread a 2k-token prompt's ~170 ms stall over), or, where the
// model sees everything there, its worst case within the budget. One rule for the router and admission: a
// filter of its own (TPOT and TTFT from the table, without the idle floor or the worst case) refused
// replicas admission would have taken, and kv-aware then shed requests the next-ranked candidate of any
// other policy would have served (the Azure code trace, tuning seeds 1-2: 33.8 and 50.2 requests/s of SLO
// capacity with its own filter, 37.0 and 50.2 with admission's). When every replica would harm a stream,
// the request does not fit anywhere: admission queues it until those streams end when that is within its
// allowance, else sheds it at arrival. A candidate that does not fit is chosen only when none does (the
// decision then says fits = false; admission queues). Unknown KV (num_gpu_blocks not scraped) does not
// count against a candidate.
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

  mark(t: CandidateTable): void {
    for (let i = 0; i < t.n; i++) {
      t.fits[i] = t.kvAfter[i]! > this.maxKvUse || t.inflight[i]! >= this.connectionsPerReplica || t.gpuFits[i] === 0 ? 0 : 1;
    }
  }
}
