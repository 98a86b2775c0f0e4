// Checks on a request's head that uWS leaves to the application: its size (uWS parses a head of any size that
// arrives in one socket read, up to its 512 KiB read buffer, so the gateway's cap is applied here); and for a
// completion request, framing headers that must appear once (RFC 9112 §6.1, §6.3: duplicate Content-Length, a repeated or non-chunked Transfer-Encoding; uWS frames
// by the first and would pass the ambiguity on to whatever sits in front), one Authorization, one
// Content-Type, and that Content-Type's media type. Thread: main. Hot path: one forEach over the request's
// headers (a native call per header, ≈ 1 µs for a dozen) and one closure per request.
import type { HttpRequest } from './uws.ts';

/** What is wrong with the head, or null. Reads req: call it before any await. */
export type HeadProblem = 'too_large' | 'framing' | 'duplicate_authorization' | 'content_type' | null;

/** `HTTP/1.1\r\n` and the spaces around the target: the request line's bytes besides method, path and query. */
const REQUEST_LINE_FIXED = ' '.length + ' HTTP/1.1\r\n'.length;
/** Each field's `: ` and CRLF, and the empty line that ends the head. */
const FIELD_FIXED = 4;
const HEAD_END = 2;

/**
 * The request line's bytes as the client sent them (give the route's path when it is fixed: one getUrl
 * call saved). Query strings count: uWS routes on the path alone and hands any query through.
 * Cost: one getQuery, ≈ 0.05 µs measured in process.
 */
export function requestLineBytes(req: HttpRequest, method: string, path: string): number {
  // This build returns undefined when the target has no `?` (its typing says string), '' for a bare `?`.
  const query = req.getQuery() as string | undefined;
  return method.length + path.length + (query === undefined ? 0 : query.length + 1) + REQUEST_LINE_FIXED;
}

/**
 * The head's size: request line plus every field as `name: value\r\n` plus the closing CRLF. Counted as uWS
 * hands the fields (values trimmed, strings in UTF-16 code units), so it equals the wire bytes for the ASCII
 * heads clients send, and never exceeds them by more than the trimmed spaces.
 * Cost: one forEach, no allocation (the accumulator is module state: the call is synchronous, on one thread).
 */
let sumBytes = 0;
const addField = (key: string, value: string): void => {
  sumBytes += key.length + value.length + FIELD_FIXED;
};
export function headBytes(req: HttpRequest, lineBytes: number): number {
  sumBytes = lineBytes + HEAD_END;
  req.forEach(addField);
  return sumBytes;
}

/**
 * uWS closes the connection after the response when the request's Connection header has five characters
 * (`close`, any case) or the request is HTTP/1.0 (HttpContext.h: `getHeader("connection").length() == 5`).
 * This mirrors the first test; the build gives JS no way to see the HTTP version, so an HTTP/1.0 client is
 * told a keep-alive timeout for a connection uWS then closes (harmless: such a client closes it too).
 * Cost: one getHeader, ≈ 0.23 µs measured in process.
 */
export function keepsAlive(req: HttpRequest): boolean {
  return req.getHeader('connection').length !== 5;
}

/** `maxBytes`: server.max_header_bytes; `lineBytes`: requestLineBytes() of this request. */
export function checkHead(req: HttpRequest, maxBytes = Infinity, lineBytes = 0): HeadProblem {
  let bytes = lineBytes + HEAD_END;
  let contentLength = 0;
  let transferEncoding = 0;
  let te = '';
  let authorization = 0;
  let contentType = 0;
  let ct = '';
  req.forEach((key, value) => {
    bytes += key.length + value.length + FIELD_FIXED;
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
  if (bytes > maxBytes) return 'too_large';
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
