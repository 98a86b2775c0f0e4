// The two answers admission gives instead of a replica: 400 context_length_exceeded for a request larger than
// any replica's whole KV (prompt + max_tokens × n: it could never run; OpenAI's wording, with that size as the
// context length), and 429 server_overloaded whose message states the same estimate as its Retry-After. Thread: the acceptor; only on refusals.
import type { Rejection } from '../errors/rejection.ts';
import type { AdmissionRequest, ShedReason } from './types.ts';

export function tooLarge(req: AdmissionRequest, wholeTokens: number): Rejection {
  const r = req.route;
  const p = req.promptParam;
  return {
    code: 'context_length_exceeded',
    param: p,
    message: `This model's maximum context length is ${wholeTokens} tokens. However, you requested ${r.promptTokens + r.maxTokens * req.n} tokens (${r.promptTokens} in the ${p}, ${r.maxTokens * req.n} in the completion${req.n > 1 ? `: ${req.n} × ${r.maxTokens}` : ''}). Please reduce the length of the ${p} or completion.`,
  };
}

export function overloaded(reason: ShedReason, retryAfterSeconds: number, allowanceMs: number, poolId: string, maxQueued: number): Rejection {
  const message = reason === 'slo_unreachable'
    ? `No replica of ${poolId} can serve this request within its TTFT and TPOT targets now; estimated ${retryAfterSeconds} s until one can.`
    : reason === 'queue_full'
    ? `The admission queue of ${poolId} is full (${maxQueued} requests); it should drain in about ${retryAfterSeconds} s.`
    : reason === 'queue_missing'
    ? `Requests queued for ${poolId} lately waited out their allowance; estimated ${retryAfterSeconds} s until those queued ahead of this one have left.`
    : reason === 'deadline_passed'
      ? `No room for this request on ${poolId} within its ${Math.round(allowanceMs)} ms queue allowance; estimated ${retryAfterSeconds} s until there is.`
      : `No room for this request on ${poolId}: the estimated wait (${retryAfterSeconds} s) exceeds its ${Math.round(allowanceMs)} ms queue allowance.`;
  return { code: 'server_overloaded', retryAfterSeconds, message };
}
