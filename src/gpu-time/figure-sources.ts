// The GPU-time model's learned figures per replica, as the metrics layer's scrape-time sources (the gauges
// gateway_gpu_prefill_tokens_per_second, gateway_gpu_decode_step_base_seconds and
// gateway_gpu_decode_step_per_seq_seconds). Replica ids come from the registry's configured members, so the
// label set is bounded by config. Thread: the acceptor that owns the model; runs once per GET /metrics.
import type { GatewayConfig } from '../config/schema.ts';
import type { FleetView } from '../router/types.ts';
import type { GpuTimeModel } from './gpu-time-model.ts';

type Figure = (model: GpuTimeModel, slot: number, pool: string) => number;

function* each(model: GpuTimeModel, fleet: FleetView, pools: GatewayConfig['pools'], figure: Figure): Iterable<[string, number]> {
  for (const p of pools) {
    for (const slot of fleet.candidates(p.id)) {
      const v = figure(model, slot, p.id);
      if (Number.isFinite(v)) yield [fleet.replica(slot).id, v];
    }
  }
}

export function gpuFigureSources(model: GpuTimeModel, fleet: FleetView, pools: () => GatewayConfig['pools']): {
  gpuPrefillRate: () => Iterable<[string, number]>;
  gpuDecodeBase: () => Iterable<[string, number]>;
  gpuDecodePerSeq: () => Iterable<[string, number]>;
} {
  return {
    gpuPrefillRate: () => each(model, fleet, pools(), (m, slot, pool) => m.prefillTokensPerSecond(slot, pool)),
    gpuDecodeBase: () => each(model, fleet, pools(), (m, slot, pool) => (m.decodeFigures(slot, pool)?.baseMs ?? Number.NaN) / 1000),
    gpuDecodePerSeq: () => each(model, fleet, pools(), (m, slot, pool) => (m.decodeFigures(slot, pool)?.perSeqMs ?? Number.NaN) / 1000),
  };
}
