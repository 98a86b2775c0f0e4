// Serialises the OpenAI error envelope {"error":{message,type,param,code}} with `code` always a string.
// Thread: main. On the hot path for rejections only; static bodies (no custom message) are built once.
import { ERROR_CODES, type ErrorCode } from './codes.ts';
import type { Rejection } from './rejection.ts';

const staticBodies = new Map<ErrorCode, string>();
for (const code of Object.keys(ERROR_CODES) as ErrorCode[]) {
  const e = ERROR_CODES[code];
  staticBodies.set(code, JSON.stringify({ error: { message: e.message, type: e.type, param: null, code } }));
}

export function errorBody(r: Rejection): string {
  if (r.message === undefined && r.param == null && r.type === undefined && r.wireCode === undefined) {
    return staticBodies.get(r.code)!;
  }
  const e = ERROR_CODES[r.code];
  return JSON.stringify({
    error: { message: r.message ?? e.message, type: r.type ?? e.type, param: r.param ?? null, code: r.wireCode ?? r.code },
  });
}

/** The single SSE event that ends a stream that failed after its first byte. */
export function errorEvent(r: Rejection): string {
  return `data: ${errorBody(r)}\n\n`;
}

/**
 * The event that ends a failed Responses API stream: `event: error` with the Responses error fields (type,
 * code, message, param: what the AI SDK reads) and the `error` envelope (what the openai SDKs throw on).
 */
export function responsesErrorEvent(r: Rejection): string {
  const e = (JSON.parse(errorBody(r)) as { error: { message: string; code: string; param: string | null } }).error;
  return `event: error\ndata: ${JSON.stringify({ type: 'error', code: e.code, message: e.message, param: e.param, error: e })}\n\n`;
}
