// Checks on a completion request's head that uWS leaves to the application: framing headers that must appear
// once (RFC 9112 §6.1, §6.3: duplicate Content-Length, a repeated or non-chunked Transfer-Encoding; uWS frames
// by the first and would pass the ambiguity on to whatever sits in front), one Authorization, one
// Content-Type, and that Content-Type's media type. Thread: main. Hot path: one forEach over the request's
// headers (a native call per header, ≈ 1 µs for a dozen) and one closure per request.
import type { HttpRequest } from './uws.ts';

/** What is wrong with the head, or null. Reads req: call it before any await. */
export type HeadProblem = 'framing' | 'duplicate_authorization' | 'content_type' | null;

export function checkHead(req: HttpRequest): HeadProblem {
  let contentLength = 0;
  let transferEncoding = 0;
  let te = '';
  let authorization = 0;
  let contentType = 0;
  let ct = '';
  req.forEach((key, value) => {
    // uWS hands keys in lower case.
    if (key === 'content-length') contentLength++;
    else if (key === 'transfer-encoding') {
      transferEncoding++;
      te = value;
    } else if (key === 'authorization') authorization++;
    else if (key === 'content-type') {
      contentType++;
      ct = value;
    }
  });
  if (contentLength > 1 || transferEncoding > 1 || (transferEncoding === 1 && te.trim().toLowerCase() !== 'chunked')) return 'framing';
  if (authorization > 1) return 'duplicate_authorization';
  if (contentType > 1 || (contentType === 1 && !isJsonMediaType(ct))) return 'content_type';
  return null;
}

/** `application/json`, any case, with or without parameters (`; charset=utf-8`); not `application/jsonx`. */
export function isJsonMediaType(contentType: string): boolean {
  const semi = contentType.indexOf(';');
  return (semi === -1 ? contentType : contentType.slice(0, semi)).trim().toLowerCase() === 'application/json';
}
