// Normalises a replica's error body to the gateway envelope. vLLM answers {"error":{message,type,param,
// code:<int>}} since v0.10.1 and a flat {object:"error",message,type,code:<int>} before; other servers send
// anything. The replica's 4xx status is kept; `code` becomes a string. Thread: main. Failure path only.
import type { Rejection } from '../errors/rejection.ts';

const TYPE_BY_STATUS: Record<number, string> = {
  400: 'invalid_request_error', 401: 'invalid_request_error', 403: 'permission_error', 404: 'invalid_request_error',
  413: 'invalid_request_error', 415: 'invalid_request_error', 422: 'invalid_request_error',
};

/**
 * `notFound`: the code of a 404 whose body has none. A completion's 404 is an unknown model, except vLLM's
 * "Response with id '…' not found." (a previous_response_id the replica does not hold).
 */
export function normaliseUpstreamError(status: number, body: Buffer, notFound = 'model_not_found'): Rejection {
  let message = `The replica answered with status ${status}.`;
  let wireCode: string | undefined;
  try {
    const parsed = JSON.parse(body.toString('utf8')) as Record<string, unknown>;
    const inner = (typeof parsed.error === 'object' && parsed.error !== null ? parsed.error : parsed) as Record<string, unknown>;
    if (typeof inner.message === 'string' && inner.message) message = inner.message;
    else if (typeof parsed.error === 'string') message = parsed.error;
    else if (typeof parsed.detail === 'string') message = parsed.detail;
    if (typeof inner.code === 'string' && inner.code) wireCode = inner.code;
  } catch {
    const text = body.toString('utf8', 0, Math.min(body.length, 200)).trim();
    if (text) message = text;
  }
  if (status >= 500) return { code: 'upstream_error', message };
  if (wireCode === undefined) {
    wireCode = status === 404 ? (notFound === 'model_not_found' && message.startsWith('Response with id ') ? 'previous_response_not_found' : notFound)
      : /maximum context length/i.test(message) ? 'context_length_exceeded'
        : 'upstream_bad_request';
  }
  return { code: 'invalid_value', message, status, type: TYPE_BY_STATUS[status] ?? 'invalid_request_error', wireCode };
}
