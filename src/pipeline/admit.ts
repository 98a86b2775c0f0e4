// The admission step of each attempt: the admission controller (src/admission/) routes the request when the
// pool has room for it, or holds it in its queue until it does, or refuses it. On admission the attempt is
// dispatched at once, inside the controller's callback: its ledger entry is then in place before the
// controller's next decision (the next queued request in the same pump reads the same ledger).
// A request waiting in the queue leaves it when the client hangs up or shutdown gives up on it
// (ctx.leaveQueue, run by ctx.abortSignal()); it then reached no replica, and settlement refunds its quota.
// Thread: main. Hot path: once per attempt; one closure per request that has to wait.
import type { AdmissionOutcome, AdmissionRequest } from '../admission/types.ts';
import type { AttemptOutcome } from '../upstream/retry-policy.ts';
import { accept, dispatch, mayAttempt, unroutable, type Routed, type UpstreamJob } from './dispatch.ts';
import { reply } from './finish-request.ts';
import type { RequestContext } from './request-context.ts';
import type { Services } from './services.ts';

export interface Admitted {
  readonly routed: Routed;
  /** The attempt, already dispatched. */
  readonly outcome: Promise<AttemptOutcome>;
}

/**
 * Admits the next attempt and dispatches it; null when the request has been answered (or the client left).
 * Decided at once (the common case) it returns the answer itself, with no promise: only a request that has to
 * wait in the queue gets one (0.2-0.4 KiB less per request, `npm run bench -- pipeline`).
 */
export function admit(svc: Services, ctx: RequestContext, job: UpstreamJob, areq: AdmissionRequest): Admitted | null | Promise<Admitted | null> {
  if (ctx.cancelled || !mayAttempt(svc, ctx, job)) return null;
  ctx.trace?.stage('admit');
  let answer: Admitted | null = null;
  let later: ((a: Admitted | null) => void) | null = null;
  const ticket = svc.admission.acquire(areq, (o: AdmissionOutcome) => {
    ctx.leaveQueue = null;
    ctx.queueMs += o.queuedMs;
    ctx.trace?.admitted(o);
    answer = outcomeOf(svc, ctx, job, o);
    if (later !== null) later(answer);
  });
  if (ticket.settled) return answer;
  ctx.leaveQueue = () => svc.admission.cancel(ticket);
  return new Promise<Admitted | null>((resolve) => (later = resolve));
}

/** Dispatches an admitted attempt, or answers the client; null when there is nothing to run. */
function outcomeOf(svc: Services, ctx: RequestContext, job: UpstreamJob, o: AdmissionOutcome): Admitted | null {
  switch (o.kind) {
    case 'admitted': {
      const routed: Routed = { ok: true, slot: o.slot, replicaId: o.replicaId, decision: o.decision };
      accept(svc, ctx, job, routed);
      return { routed, outcome: dispatch(svc, ctx, job, routed) };
    }
    case 'rejected':
      reply(ctx, o.rejection, job.limitHeaders);
      return null;
    case 'unroutable':
      unroutable(svc, ctx, job, o.reason);
      return null;
    case 'cancelled':
      // The client left (nothing to answer), or shutdown gave up on the request.
      if (ctx.shutdownAborted) reply(ctx, { code: 'shutting_down', retryAfterSeconds: 1 }, job.limitHeaders);
      return null;
  }
}
