// kv-aware's fit test: a candidate fits when, with this request added, its KV use stays at or below
// 1 − admission.headroom_ratio, its decode step (every running sequence's TPOT) stays within the pool's
// target, its predicted TTFT for this request stays within the request's TTFT budget (the scorer's
// budgetMs: the pool's ttft_target_ms, or 1.25 × the request's own idle prefill when that is longer), and
// this gateway holds fewer than upstream.connections_per_replica requests there. A candidate
// that does not fit is chosen only when none does (the decision then says fits = false; admission queues).
// Unknown KV (num_gpu_blocks not scraped) does not count against a candidate.
// Thread: the acceptor. Hot path: O(candidates) comparisons.
import type { CandidateTable } from '../candidate-table.ts';

export class HeadroomFilter {
  readonly name = 'headroom-filter';
  private readonly maxKvUse: number;
  private readonly connectionsPerReplica: number;

  constructor(headroomRatio: number, connectionsPerReplica: number) {
    this.maxKvUse = 1 - headroomRatio;
    this.connectionsPerReplica = connectionsPerReplica;
  }

  mark(t: CandidateTable, tpotTargetMs: number): void {
    for (let i = 0; i < t.n; i++) {
      t.fits[i] = t.kvAfter[i]! > this.maxKvUse || t.stepMs[i]! > tpotTargetMs || t.ttftMs[i]! > t.budgetMs[i]! ||
        t.inflight[i]! >= this.connectionsPerReplica ? 0 : 1;
    }
  }
}
