// llm-d's default saturation detector, the `utilization-detector` (llm-d/llm-d-router
// pkg/epp/framework/plugins/flowcontrol/saturationdetector/utilization/detector.go, defaults in its README):
//   endpoint score = max(waiting / queueDepthThreshold, kv usage / kvCacheUtilThreshold)
//   pool saturation = the mean endpoint score over the pool's endpoints; an endpoint whose metrics are
//                     missing or older than metricsStalenessThreshold scores 1.0; no endpoints: 1.0
// with queueDepthThreshold 5, kvCacheUtilThreshold 0.8, metricsStalenessThreshold 200 ms, over the scraped
// rows (the EPP's data layer), as the gateway's registry view has them.
// Thread: the run's. Hot path: one row copy per endpoint per call.
import { ReplicaRow } from '../../../src/registry/replica-table.ts';
import type { FleetView } from '../../../src/router/types.ts';

export const LLMD_SATURATION_DEFAULTS = { queueDepthThreshold: 5, kvCacheUtilThreshold: 0.8, metricsStalenessMs: 200 } as const;

export class UtilizationDetector {
  private readonly fleet: FleetView;
  private readonly row = new ReplicaRow();

  constructor(fleet: FleetView) {
    this.fleet = fleet;
  }

  /** The pool's saturation: ≥ 1.0 means saturated. */
  saturation(poolId: string): number {
    const fleet = this.fleet;
    const members = fleet.candidates(poolId);
    const now = fleet.nowMs();
    const d = LLMD_SATURATION_DEFAULTS;
    let n = 0;
    let total = 0;
    for (let i = 0; i < members.length; i++) {
      const slot = members[i]!;
      if (!fleet.isHealthy(slot)) continue; // not a ready endpoint of the pool
      n++;
      const row = this.row;
      if (!fleet.readRow(slot, row) || row.lastGoodScrapeMs === 0 || now - row.lastGoodScrapeMs > d.metricsStalenessMs || Number.isNaN(row.kvUsage)) {
        total += 1;
        continue;
      }
      total += Math.max(row.waiting / d.queueDepthThreshold, row.kvUsage / d.kvCacheUtilThreshold);
    }
    return n === 0 ? 1 : total / n;
  }
}
