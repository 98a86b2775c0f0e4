// Per-request figures admission computes once: the KV tokens a request needs on a replica, and how long it
// may wait in the queue. Both read the reply's KV figure (src/gpu-time/reply-length/: KV_QUANTILE of the
// lengths its context has produced, at most max_tokens), not max_tokens: vLLM allocates a reply's KV as it
// is generated, so budgeting caps the replies rarely reach hoards KV the fleet could serve with (a client
// that sends no max_tokens gets the context's room as its cap). The quantile and the headroom price the risk
// that replies run long together (a preemption); a stream past its figure has its reservation revised
// upward in the ledger. Without a forecast, max_tokens is the length.
// Thread: the acceptor. Pure; a few multiplications per request (idleTtftMs walks the prompt in 2,048-token
// chunks).
import type { GpuTimeModel } from '../gpu-time/gpu-time-model.ts';
import { kvReplyTokens } from '../gpu-time/reply-length/reply-forecast.ts';
import { queueAllowanceMs } from './deadline.ts';
import type { AdmissionConfig, AdmissionRequest } from './types.ts';

/**
 * How long the request may wait in the queue: its tier's queue allowance (deadline.ts), and no longer than
 * would leave it its own idle-replica TTFT within its TTFT budget.
 */
export function allowanceOf(gpu: GpuTimeModel, req: AdmissionRequest, cfg: AdmissionConfig): number {
  const r = req.route;
  // The generation that eats the end-to-end allowance: the reply as budgeted, not its cap.
  const queue = queueAllowanceMs(cfg, req.tier, kvReplyTokens(r) * req.n);
  const fig = gpu.figures(r.poolId);
  if (fig === undefined) return queue;
  const left = cfg.ttft_margin * gpu.budgetMs(r, cfg.ttft_ms_by_tier[req.tier]) - fig.idleTtftMs(r.promptTokens);
  const ms = left < queue ? left : queue;
  return ms > 0 ? ms : 0;
}

/** KV tokens the request needs on a replica holding `cachedBlocks` of its prompt: uncached prompt + reply's KV figure × n. */
export function needOf(req: AdmissionRequest, cachedBlocks: number): number {
  const r = req.route;
  const output = kvReplyTokens(r) * req.n;
  const uncached = r.promptTokens - cachedBlocks * req.blockSize;
  return output + (uncached > 0 ? uncached : 0);
}
