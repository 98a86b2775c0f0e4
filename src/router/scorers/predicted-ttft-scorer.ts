// kv-aware's one score: predicted time to first token, in milliseconds, per candidate.
//   ttft = (queued prefill ahead + this request's uncached tokens) / the replica's learned prefill rate
//        + adapter load time when the adapter is not resident + one decode step at its batch + 1
// Queued prefill = the ledger's prefill tokens (already predicted-uncached) + the scraped waiting requests
// this gateway does not account for (waiting beyond its own not-yet-first-token count) × the pool's mean
// prompt length. Also fills what the filters read: KV use after this request, the decode step once it
// joins (its TPOT), the ledger's outstanding tokens and what this request adds there.
// Stale rows: the scraped part is unknown, so only the ledger's figures count; the picker ranks them last.
// Thread: the acceptor. Hot path: one KvEstimator.read and four ledger loads per candidate, no allocation.
import { LEDGER_INFLIGHT, LEDGER_OUTSTANDING_TOKENS, LEDGER_PREFILL_TOKENS, LEDGER_RESERVED_BLOCKS, LEDGER_RUNNING } from '../../registry/inflight-ledger.ts';
import type { CandidateTable } from '../candidate-table.ts';
import type { EngineModel } from '../engine-model.ts';
import { KvState, type KvEstimator } from '../kv-estimate.ts';
import type { PrefillRateLearner } from '../prefill-rate.ts';
import type { PrefixIndex } from '../prefix-index.ts';
import type { FleetView, RouteRequest } from '../types.ts';

export class PredictedTtftScorer {
  readonly name = 'predicted-ttft-scorer';
  private readonly kv: KvEstimator;
  private readonly rates: PrefillRateLearner;
  private readonly index: PrefixIndex;
  private readonly state = new KvState();

  constructor(kv: KvEstimator, rates: PrefillRateLearner, index: PrefixIndex) {
    this.kv = kv;
    this.rates = rates;
    this.index = index;
  }

  score(req: RouteRequest, t: CandidateTable, fleet: FleetView, model: EngineModel, meanPromptTokens: number): void {
    const ledger = fleet.ledger;
    const st = this.state;
    const bs = model.blockSize;
    const totalBlocksNeeded = Math.ceil((req.promptTokens + req.maxTokens) / bs);
    const defaultRate = model.prefillTokensPerSecond;
    for (let i = 0; i < t.n; i++) {
      const slot = t.slot[i]!;
      const fresh = this.kv.read(slot, st);
      if (!Number.isNaN(st.totalBlocks)) this.index.setCapacity(slot, st.totalBlocks);
      const matched = t.matched[i]!;
      const uncached = req.promptTokens - matched * bs;
      const inflight = ledger.get(slot, LEDGER_INFLIGHT);
      const running = ledger.get(slot, LEDGER_RUNNING);
      let queued = ledger.get(slot, LEDGER_PREFILL_TOKENS);
      const unaccounted = st.waiting - (inflight - running);
      if (fresh && unaccounted > 0) queued += unaccounted * meanPromptTokens;
      const work = queued + uncached;
      const rate = this.rates.rate(slot, defaultRate);
      const prefillMs = (work / rate) * 1000;
      // A stale row's figures are not trusted: its batch and KV are what this gateway alone put there.
      const batch = (fresh && st.running > running ? st.running : running) + 1;
      const used = fresh ? st.usedBlocks : ledger.get(slot, LEDGER_RESERVED_BLOCKS);
      const newBlocks = totalBlocksNeeded - matched;
      const stepMs = model.stepMs(batch, (used + newBlocks) * bs);
      const adapterMs = req.adapter !== null && !fleet.residentAdapters(slot).includes(req.adapter) ? model.adapterLoadMs : 0;
      t.fresh[i] = fresh ? 1 : 0;
      t.workTokens[i] = work;
      t.prefillMs[i] = prefillMs;
      t.stepMs[i] = stepMs;
      t.adapterMs[i] = adapterMs;
      t.ttftMs[i] = prefillMs + adapterMs + stepMs;
      const idleMs = 1.25 * ((uncached / rate) * 1000 + adapterMs + model.stepMs(1, req.promptTokens));
      t.budgetMs[i] = idleMs > model.ttftTargetMs ? idleMs : model.ttftTargetMs;
      t.kvAfter[i] = !fresh || Number.isNaN(st.totalBlocks) ? Number.NaN : (used + newBlocks) / st.totalBlocks;
      t.inflight[i] = inflight;
      t.outstanding[i] = ledger.get(slot, LEDGER_OUTSTANDING_TOKENS);
      t.addTokens[i] = uncached + req.maxTokens;
    }
  }
}
