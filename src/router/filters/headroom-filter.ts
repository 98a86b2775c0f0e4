// kv-aware's fit test: a candidate fits when, with this request added, its KV use stays at or below
// 1 − admission.headroom_ratio, its predicted TPOT (the scorer's stepMs: decode step / (1 − ρ)) stays within
// margin × the pool's target, its predicted TTFT for this request stays within margin × the request's TTFT
// budget (the scorer's budgetMs: its tier's, or 1.25 × its own idle prefill when that is longer; margin is
// admission.slo_margin, so kv-aware fits exactly what admission admits), and this gateway holds fewer than
// upstream.connections_per_replica requests there. A candidate
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

  mark(t: CandidateTable, tpotTargetMs: number, margin = 1): void {
    const tpot = margin * tpotTargetMs;
    for (let i = 0; i < t.n; i++) {
      t.fits[i] = t.kvAfter[i]! > this.maxKvUse || t.stepMs[i]! > tpot || t.ttftMs[i]! > margin * t.budgetMs[i]! ||
        t.inflight[i]! >= this.connectionsPerReplica ? 0 : 1;
    }
  }
}
