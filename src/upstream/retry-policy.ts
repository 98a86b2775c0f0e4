// What one upstream attempt's failure means, in one vocabulary: whether another replica may be tried, whether
// it counts against the replica's health, which upstream-error series counts it, and what the client is told
// if it was the last attempt. The transport's kinds (upstream-errors.ts) and the replica's answers map onto
// these kinds here and nowhere else.
// The rule behind it: nothing reaches the client before the replica's first token (streams) or its whole
// body (non-streams), so every failure before that point may be retried on another replica, up to
// upstream.max_attempts; after it, the stream ends with one error event.
// Thread: main. Not hot: runs only on failures (and one table read per failed attempt).
import type { Rejection } from '../errors/rejection.ts';
import type { UpstreamErrorKind } from '../metrics/metrics.ts';
import type { UpstreamFailureKind } from './upstream-errors.ts';

/** A failure before anything reached the client: another replica may be tried. */
export type RetryableFailure =
  | 'connect' //             the TCP connection never came up
  | 'reset' //               the connection failed after it was up, before the first byte
  | 'headers_timeout' //     no response head within the request's headers timeout
  | 'first_token_timeout' // a stream's first token did not come within upstream.first_token_timeout_ms
  | 'stalled' //             the replica showed no progress for upstream.stall_timeout_ms (src/pipeline/stall-watch.ts)
  | 'status_5xx' //          the replica answered with a 5xx
  | 'empty_response' //      a 200 stream that ended without a token
  | 'other'; //              anything else before the first byte (body timeout, a body over the size limit)

/** A failure after the answer started (or the replica's own 4xx): the client has it, nothing is retried. */
export type FinalFailure = 'mid_stream' | 'status_4xx';

export type FailureKind = RetryableFailure | FinalFailure;

/** How one attempt ended. */
export type AttemptOutcome =
  /** Answered: a stream (ended cleanly or by an error event after the first byte), a body, or a replica 4xx. */
  | { kind: 'sent'; failure: FinalFailure | null }
  /** Failed before anything reached the client; `rejection` is the answer if no other attempt succeeds. */
  | { kind: 'retry'; failure: RetryableFailure; rejection: Rejection }
  /** The client left (or shutdown gave up on the request) while the attempt ran. */
  | { kind: 'cancelled' };

interface FailureTraits {
  /** Counts as a data-plane failure of the replica (the registry marks it down after enough of them). */
  readonly replicaFault: boolean;
  /** The gateway_upstream_errors_total series. */
  readonly metric: UpstreamErrorKind;
}

const TRAITS: Readonly<Record<FailureKind, FailureTraits>> = {
  connect: { replicaFault: true, metric: 'connect' },
  reset: { replicaFault: true, metric: 'reset' },
  headers_timeout: { replicaFault: false, metric: 'first_token_timeout' },
  first_token_timeout: { replicaFault: false, metric: 'first_token_timeout' },
  // The stall watch holds the replica out of routing itself, until its engine moves again.
  stalled: { replicaFault: false, metric: 'stalled' },
  status_5xx: { replicaFault: false, metric: 'status_5xx' },
  empty_response: { replicaFault: false, metric: 'reset' },
  other: { replicaFault: false, metric: 'reset' },
  mid_stream: { replicaFault: false, metric: 'mid_stream' },
  status_4xx: { replicaFault: false, metric: 'status_4xx' },
};

export function isReplicaFault(f: FailureKind): boolean {
  return TRAITS[f].replicaFault;
}

export function errorMetricOf(f: FailureKind): UpstreamErrorKind {
  return TRAITS[f].metric;
}

/** Another attempt is allowed after `attemptsMade` failed ones (the router may still find no replica left). */
export function mayRetry(attemptsMade: number, maxAttempts: number): boolean {
  return attemptsMade < maxAttempts;
}

/** A transport failure before the first byte, as the transport reported it. */
export function transportFailure(kind: UpstreamFailureKind, err: Error): { failure: RetryableFailure; rejection: Rejection } {
  switch (kind) {
    case 'connect':
    case 'reset':
      return { failure: kind, rejection: unreachable(err) };
    case 'headers_timeout':
      return { failure: 'headers_timeout', rejection: { code: 'upstream_timeout' } };
    case 'body_timeout':
    case 'aborted':
    case 'other':
      return { failure: 'other', rejection: unreachable(err) };
  }
}

/** A replica's non-200 answer: a 5xx may be another replica's success; a 4xx is the client's own problem. */
export function statusFailure(status: number): 'status_5xx' | 'status_4xx' {
  return status >= 500 ? 'status_5xx' : 'status_4xx';
}

export const FIRST_TOKEN_TIMEOUT: { failure: RetryableFailure; rejection: Rejection } = { failure: 'first_token_timeout', rejection: { code: 'upstream_timeout' } };
export const STALLED: { failure: RetryableFailure; rejection: Rejection } = {
  failure: 'stalled',
  rejection: { code: 'upstream_timeout', message: 'The replica made no progress within upstream.stall_timeout_ms.' },
};
export const TOO_LARGE: { failure: RetryableFailure; rejection: Rejection } = { failure: 'other', rejection: { code: 'upstream_error', message: 'The replica response was too large.' } };
export const EMPTY_STREAM: { failure: RetryableFailure; rejection: Rejection } = { failure: 'empty_response', rejection: { code: 'upstream_unavailable', message: 'The replica ended the stream without a token.' } };

function unreachable(err: Error): Rejection {
  return { code: 'upstream_unavailable', message: `The replica could not be reached (${(err as { code?: string }).code ?? err.message}).` };
}
