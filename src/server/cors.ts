// CORS from the config's `cors` section: which browser origins may call the gateway, the headers an actual
// response to one of them carries, and the gateway's own answer to a preflight (OPTIONS is never forwarded).
// A disallowed origin gets no CORS header at all, so the browser refuses to hand the response to the page.
// Thread: main. Built at setup and on reload; per request one Map lookup, and only when origins are configured
// (otherwise the acceptor does not even read the Origin header).
import type { GatewayConfig } from '../config/schema.ts';
import type { HeaderList } from '../relay/client-sink.ts';

/** Response headers a page's script may read (browsers hide all but a few unless listed here). */
export const EXPOSED_HEADERS = [
  'x-request-id', 'x-ratelimit-limit-tokens', 'x-ratelimit-remaining-tokens', 'x-ratelimit-reset-tokens',
  'x-ratelimit-limit-requests', 'x-ratelimit-remaining-requests', 'retry-after', 'x-should-retry', 'x-gateway-route',
].join(', ');

/** Allowed request headers when a preflight does not list the ones it wants. */
const DEFAULT_ALLOW_HEADERS = 'authorization, content-type, x-request-id';

/** Access-Control-Request-Headers as browsers send it: a comma-separated list of header names (RFC 9110 tokens). */
const HEADER_NAMES = /^[A-Za-z0-9!#$%&'*+.^_`|~-]+(?:[ \t]*,[ \t]*[A-Za-z0-9!#$%&'*+.^_`|~-]+)*$/;
const MAX_REQUEST_HEADERS_CHARS = 2048;

export class CorsPolicy {
  /** False when no origin is configured: nothing below is ever consulted. */
  readonly enabled: boolean;
  private readonly byOrigin = new Map<string, HeaderList>();
  /** The headers for every origin when "*" is configured. */
  private readonly anyOrigin: HeaderList | null;
  private readonly maxAge: string;

  constructor(cfg: GatewayConfig['cors']) {
    this.maxAge = String(cfg.max_age_seconds);
    let any: HeaderList | null = null;
    for (const o of cfg.allowed_origins) {
      if (o === '*') {
        // The literal "*": the answer does not depend on the origin, so no Vary; no credentials are ever allowed.
        any = Object.freeze([['access-control-allow-origin', '*'], ['access-control-expose-headers', EXPOSED_HEADERS]] as const);
        continue;
      }
      // Browsers serialise an origin in lower case (scheme and host), with no trailing slash.
      const origin = o.toLowerCase();
      this.byOrigin.set(origin, Object.freeze([
        ['access-control-allow-origin', origin], ['vary', 'Origin'], ['access-control-expose-headers', EXPOSED_HEADERS],
      ] as const));
    }
    this.anyOrigin = any;
    this.enabled = any !== null || this.byOrigin.size > 0;
  }

  /** Headers for an actual (non-preflight) response to `origin`, or null when it is not allowed. */
  actual(origin: string): HeaderList | null {
    return this.byOrigin.get(origin) ?? this.anyOrigin;
  }

  /**
   * Headers answering a preflight from `origin` for a route whose methods are `allow`, or null when the origin
   * is not allowed. The request headers the browser asks for are granted as asked (Authorization and the
   * SDKs' own x-stainless-* headers among them) when they are a well-formed list of names.
   */
  preflight(origin: string, requestHeaders: string, allow: string): HeaderList | null {
    const base = this.actual(origin);
    if (base === null) return null;
    const headers = requestHeaders !== '' && requestHeaders.length <= MAX_REQUEST_HEADERS_CHARS && HEADER_NAMES.test(requestHeaders)
      ? requestHeaders
      : DEFAULT_ALLOW_HEADERS;
    return [
      base[0]!,
      ['vary', base === this.anyOrigin ? 'Access-Control-Request-Headers' : 'Origin, Access-Control-Request-Headers'],
      ['access-control-allow-methods', allow],
      ['access-control-allow-headers', headers],
      ['access-control-max-age', this.maxAge],
    ];
  }
}
