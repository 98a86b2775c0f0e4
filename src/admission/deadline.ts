// How long a request may wait in the admission queue: its tier's queue allowance, reduced when the request's
// own generation (max_tokens × n at the TPOT target) already eats its tier's end-to-end allowance, and never
// above max_queue_ms. The queue is ordered by arrival + this allowance (earliest deadline first), so a
// premium request (1 s by default) goes ahead of a standard one (2 s) that arrived at the same moment, and a
// batch request (10 s) waits behind both but is kept longer before it is shed.
// Example with the defaults: standard tier, max_tokens 1,024 → 1,024 × 50 ms = 51 s of the 120 s end-to-end
// allowance, 69 s left, so the 2 s queue allowance stands; max_tokens 2,400 → 120 s, nothing left: the
// request is admitted only if there is room at once (an allowance of 0 ms).
// Thread: any. Pure; a few multiplications per request.
import type { AdmissionConfig, SlaTier } from './types.ts';

export function queueAllowanceMs(cfg: AdmissionConfig, tier: SlaTier, outputTokens: number): number {
  const tierQueue = cfg.queue_ms_by_tier[tier];
  const left = cfg.end_to_end_ms_by_tier[tier] - outputTokens * cfg.tpot_target_ms;
  let ms = tierQueue < left ? tierQueue : left;
  if (ms > cfg.max_queue_ms) ms = cfg.max_queue_ms;
  return ms > 0 ? ms : 0;
}
