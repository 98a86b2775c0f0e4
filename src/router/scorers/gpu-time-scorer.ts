// kv-aware's score, in milliseconds per candidate: the GPU-time model's predicted TTFT of this request there
// (src/gpu-time/: the prefill queued ahead and its own uncached work over the replica's learned rate, riding
// in decode steps at its batch, plus an adapter load when not resident). Also fills what the filters read:
// KV use after it, the ledger's outstanding tokens with what it adds (its uncached prompt and its expected
// reply, as the ledger counts it), and admission's GPU-time verdict on the same prediction (GpuFit.decide:
// TTFT, the TPOT of the batch it joins, no stream harmed), so that the router's fit and admission's are one rule.
// Stale rows: the scraped part is unknown, so only the ledger's figures count; the picker ranks them last.
// Thread: the acceptor. Hot path: one model prediction and one ledger load per candidate, no allocation.
import { LEDGER_OUTSTANDING_TOKENS } from '../../registry/inflight-ledger.ts';
import { GpuPrediction, type GpuTimeModel } from '../../gpu-time/gpu-time-model.ts';
import { meanReplyTokens } from '../../gpu-time/reply-length/reply-forecast.ts';
import { GpuFit } from '../../admission/gpu-fit.ts';
import type { CandidateTable } from '../candidate-table.ts';
import type { PrefixIndex } from '../prefix-index.ts';
import type { FleetView, RouteRequest } from '../types.ts';

export class GpuTimeScorer {
  readonly name = 'gpu-time-scorer';
  private readonly p = new GpuPrediction();
  private readonly fit = new GpuFit();
  private readonly ttftMargin: number;
  private readonly tpotMargin: number;

  /** The margins admission judges with (admission.ttft_margin, .tpot_margin). */
  constructor(ttftMargin = 1, tpotMargin = 1) {
    this.ttftMargin = ttftMargin;
    this.tpotMargin = tpotMargin;
  }

  score(req: RouteRequest, t: CandidateTable, fleet: FleetView, model: GpuTimeModel, index: PrefixIndex): void {
    const ledger = fleet.ledger;
    const p = this.p;
    // Per decision, not per candidate: the pool's figures and the request's TTFT budget (its tier's, or 1.25 ×
    // its idle TTFT for a long prompt, which walks the prompt in chunks).
    const fig = model.figures(req.poolId)!;
    const budget = model.budgetMs(req);
    for (let i = 0; i < t.n; i++) {
      const slot = t.slot[i]!;
      const matched = t.matched[i]!;
      // The per-stream figures left pending: decide() asks for them only where the TTFT and TPOT fit.
      model.predict(req, slot, matched, p, false);
      if (!Number.isNaN(p.totalBlocks)) index.setCapacity(slot, p.totalBlocks);
      t.fresh[i] = p.fresh ? 1 : 0;
      t.workTokens[i] = p.workAhead;
      t.prefillMs[i] = p.prefillMs;
      t.adapterMs[i] = p.adapterMs;
      t.ttftMs[i] = p.ttftMs;
      t.kvAfter[i] = p.kvAfter;
      // Admission's own verdict on this prediction (no second prediction): the tier's budget admission set
      // on the request, nothing waited yet.
      t.gpuFits[i] = this.fit.decide(model, fig, req, slot, p, budget, 0, this.ttftMargin, this.tpotMargin, false) ? 1 : 0;
      t.inflight[i] = p.inflight;
      t.outstanding[i] = ledger.get(slot, LEDGER_OUTSTANDING_TOKENS);
      const uncached = req.promptTokens - matched * fig.blockSize;
      t.addTokens[i] = (uncached > 0 ? uncached : 0) + meanReplyTokens(req);
    }
  }
}
