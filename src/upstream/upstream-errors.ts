// Maps transport failures of an upstream attempt to a small set of kinds the retry policy and metrics use.
// Thread: main. Not hot: runs only on failures.
export type UpstreamFailureKind = 'connect' | 'reset' | 'headers_timeout' | 'body_timeout' | 'aborted' | 'other';

const CONNECT_CODES = new Set(['ECONNREFUSED', 'UND_ERR_CONNECT_TIMEOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EADDRNOTAVAIL']);
const RESET_CODES = new Set(['ECONNRESET', 'UND_ERR_SOCKET', 'EPIPE', 'UND_ERR_CLOSED']);

export function classifyUpstreamError(err: Error, abortedByUs: boolean): UpstreamFailureKind {
  if (abortedByUs) return 'aborted';
  const code = (err as { code?: string }).code ?? '';
  if (CONNECT_CODES.has(code)) return 'connect';
  if (RESET_CODES.has(code)) return 'reset';
  if (code === 'UND_ERR_HEADERS_TIMEOUT') return 'headers_timeout';
  if (code === 'UND_ERR_BODY_TIMEOUT') return 'body_timeout';
  if (err.name === 'AbortError' || code === 'UND_ERR_ABORTED') return 'aborted';
  return 'other';
}
