// Per-request figures admission computes once: the KV tokens a request needs on a replica, and how long it
// may wait in the queue. Thread: the acceptor. Pure; a few multiplications per request (idleTtftMs walks the
// prompt in 2,048-token chunks).
import type { GpuTimeModel } from '../gpu-time/gpu-time-model.ts';
import { queueAllowanceMs } from './deadline.ts';
import type { AdmissionConfig, AdmissionRequest } from './types.ts';

/**
 * How long the request may wait in the queue: its tier's queue allowance (deadline.ts), and no longer than
 * would leave it its own idle-replica TTFT within its TTFT budget.
 */
export function allowanceOf(gpu: GpuTimeModel, req: AdmissionRequest, cfg: AdmissionConfig): number {
  const r = req.route;
  const queue = queueAllowanceMs(cfg, req.tier, r.maxTokens * req.n);
  const fig = gpu.figures(r.poolId);
  if (fig === undefined) return queue;
  const left = cfg.ttft_margin * gpu.budgetMs(r, cfg.ttft_ms_by_tier[req.tier]) - fig.idleTtftMs(r.promptTokens);
  const ms = left < queue ? left : queue;
  return ms > 0 ? ms : 0;
}

export function needOf(req: AdmissionRequest, cachedBlocks: number): number {
  const r = req.route;
  const output = r.maxTokens * req.n;
  const uncached = r.promptTokens - cachedBlocks * req.blockSize;
  return output + (uncached > 0 ? uncached : 0);
}
