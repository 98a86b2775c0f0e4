// GatewayError: the one error class, for unexpected failures and I/O boundaries. Expected rejections on the
// data plane (quota, admission, routing) are plain Rejection values instead, so no stack is captured per 429.
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

export class GatewayError extends Error implements Rejection {
  override name = 'GatewayError';
  readonly code: ErrorCode;
  readonly param: string | null;
  readonly retryAfterSeconds: number | undefined;
  readonly status: number;

  constructor(code: ErrorCode, message?: string, opts: { param?: string | null; retryAfterSeconds?: number; cause?: unknown } = {}) {
    super(message ?? ERROR_CODES[code].message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.code = code;
    this.param = opts.param ?? null;
    this.retryAfterSeconds = opts.retryAfterSeconds;
    this.status = ERROR_CODES[code].status;
  }
}

export function statusOf(r: Rejection): number {
  return r.status ?? ERROR_CODES[r.code].status;
}
