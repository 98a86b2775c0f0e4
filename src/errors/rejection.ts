// Rejection: an expected refusal on the data plane (bad input, quota, admission, routing, a replica's error),
// as a plain value answered with the error envelope, so no Error and no stack is captured per 429. Unexpected
// failures are thrown as ordinary errors and answered as internal_error.
// Thread: any.
import { ERROR_CODES, type ErrorCode } from './codes.ts';

export interface Rejection {
  readonly code: ErrorCode;
  readonly message?: string | undefined;
  readonly param?: string | null | undefined;
  /** Whole seconds, at least 1; required for 429 and 503. */
  readonly retryAfterSeconds?: number | undefined;
  /** Overrides the table's status (replica 4xx passed through). */
  readonly status?: number | undefined;
  /** Overrides the OpenAI type and code (replica 4xx passed through). */
  readonly type?: string | undefined;
  readonly wireCode?: string | undefined;
}

export function statusOf(r: Rejection): number {
  return r.status ?? ERROR_CODES[r.code].status;
}
