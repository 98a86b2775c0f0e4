// Expediter's admission on equal terms for every policy in the race: each gateway's router judges its policy's
// pick with admission's own rules before admission sees it (src/router/fit-first.ts), on the fleet's best
// prefix information (the run's KV-events index, which the engines feed), and moves a pick that does not
// fit to that policy's next-ranked candidate that does. The rules are admission's: the GPU-time model's TTFT
// and TPOT there within the request's budget and margins, no stream pushed past its TPOT target
// (src/admission/gpu-fit.ts); fewer than connections_per_replica of this gateway's requests in flight
// there; room for the request's KV need beyond the headroom (pool-budget.ts).
// Thread: the run's. Hot path: one GPU-time prediction per judged replica.
import { GpuFit } from '../../src/admission/gpu-fit.ts';
import { PoolBudgetReader } from '../../src/admission/pool-budget.ts';
import type { GatewayConfig } from '../../src/config/schema.ts';
import type { GpuTimeModel } from '../../src/gpu-time/gpu-time-model.ts';
import { LEDGER_INFLIGHT } from '../../src/registry/inflight-ledger.ts';
import { FitFirst, type FitJudge } from '../../src/router/fit-first.ts';
import type { KvEstimator } from '../../src/router/kv-estimate.ts';
import type { PrefixLookup } from '../../src/router/prefix-match.ts';
import type { FleetView, RouteRequest } from '../../src/router/types.ts';

class AdmissionRules implements FitJudge {
  private readonly fit = new GpuFit();
  private readonly budget: PoolBudgetReader;
  private readonly fleet: FleetView;
  private readonly gpu: GpuTimeModel;
  private readonly cfg: GatewayConfig;
  private readonly blockSize: number;

  constructor(cfg: GatewayConfig, fleet: FleetView, kv: KvEstimator, gpu: GpuTimeModel, blockSize: number) {
    this.cfg = cfg;
    this.fleet = fleet;
    this.gpu = gpu;
    this.blockSize = blockSize;
    this.budget = new PoolBudgetReader(fleet, kv);
  }

  fits(req: RouteRequest, slot: number, cachedBlocks: number): boolean {
    const a = this.cfg.admission;
    if (this.fleet.ledger.get(slot, LEDGER_INFLIGHT) >= this.cfg.upstream.connections_per_replica) return false;
    const uncached = req.promptTokens - cachedBlocks * this.blockSize;
    const need = req.maxTokens + (uncached > 0 ? uncached : 0);
    if (this.budget.replicaRoom(slot, a.headroom_ratio) < need) return false;
    // The tier's budget admission set on the request before routing (the race's tenants are all standard).
    const tierMs = req.ttftBudgetMs ?? a.ttft_ms_by_tier.standard;
    return this.fit.judge(this.gpu, req, slot, cachedBlocks, tierMs, 0, a.ttft_margin, a.tpot_margin);
  }
}

/** The fit-first judge of one simulated gateway; `prefix`: the run's KV-events index, null without events. */
export function equalTerms(cfg: GatewayConfig, fleet: FleetView, kv: KvEstimator, gpu: GpuTimeModel, blockSize: number, prefix: PrefixLookup | null): FitFirst {
  return new FitFirst(fleet.ledger.slots, prefix, new AdmissionRules(cfg, fleet, kv, gpu, blockSize));
}
