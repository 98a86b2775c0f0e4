// The gateway's paths: which methods each route takes (the `Allow` of a 405 and of an OPTIONS answer), the id in
// /v1/responses/{id}[/cancel], and each completion route's path. Thread: main (each acceptor thread). Per
// request: one Map lookup, or a prefix test and a slice.
import type { Route } from '../pipeline/parse-body.ts';

export const MODEL_PREFIX = '/v1/models/';
const RESPONSE_PREFIX = '/v1/responses/';
const CANCEL_SUFFIX = '/cancel';

/** The path of each completion route, for the size of its request line (requestLineBytes). */
export const COMPLETION_PATHS: Readonly<Record<Route, string>> = { chat: '/v1/chat/completions', completions: '/v1/completions', responses: '/v1/responses' };

/** The methods of each route (the `Allow` of a 405 and of an OPTIONS answer). */
const ROUTES: ReadonlyMap<string, string> = new Map([
  ['/v1/chat/completions', 'POST, OPTIONS'], ['/v1/completions', 'POST, OPTIONS'], ['/v1/responses', 'POST, OPTIONS'], ['/v1/models', 'GET, OPTIONS'],
  ['/healthz', 'GET, OPTIONS'], ['/readyz', 'GET, OPTIONS'], ['/metrics', 'GET, OPTIONS'],
]);

export function allowedMethods(url: string): string | undefined {
  const known = ROUTES.get(url);
  if (known !== undefined) return known;
  if (url.startsWith(MODEL_PREFIX)) return 'GET, OPTIONS';
  const id = responseIdOf(url);
  if (id === null) return undefined;
  return id.cancel ? 'POST, OPTIONS' : 'GET, OPTIONS';
}

/** The id of /v1/responses/{id} or /v1/responses/{id}/cancel (percent-decoded), or null for another path. */
export function responseIdOf(url: string): { id: string; cancel: boolean } | null {
  if (!url.startsWith(RESPONSE_PREFIX)) return null;
  const cancel = url.endsWith(CANCEL_SUFFIX);
  const raw = url.slice(RESPONSE_PREFIX.length, cancel ? -CANCEL_SUFFIX.length : undefined);
  if (raw === '' || raw.includes('/')) return null;
  try {
    return { id: decodeURIComponent(raw), cancel };
  } catch {
    return { id: raw, cancel };
  }
}
