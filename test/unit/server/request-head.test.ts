// The head checks uWS leaves to the gateway (src/server/request-head.ts): the head's size, and which header
// lists make a completion request's framing ambiguous, its key ambiguous, or its media type wrong. The live
// answers (431, 400 and a closed connection, 401, 415) are in test/integration/gateway/header-limits.test.ts
// and hostile-corpus.test.ts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { checkHead, headBytes, isJsonMediaType, keepsAlive, requestLineBytes } from '../../../src/server/request-head.ts';
import type { HttpRequest } from '../../../src/server/uws.ts';

/** The one HttpRequest method checkHead reads, over a header list as uWS hands it (keys lower-cased). */
const head = (headers: Array<[string, string]>): HttpRequest => ({ forEach: (cb: (k: string, v: string) => void) => headers.forEach(([k, v]) => cb(k, v)) }) as unknown as HttpRequest;

test('media types: application/json with any case and parameters; nothing that merely starts with it', () => {
  for (const ok of ['application/json', 'Application/JSON', 'application/json; charset=utf-8', 'application/json ;charset=UTF-8', ' application/json ']) assert.equal(isJsonMediaType(ok), true, ok);
  for (const bad of ['application/jsonx', 'application/json-patch+json', 'application/json5', 'text/json', 'application/ json', 'application', '', '*/*']) assert.equal(isJsonMediaType(bad), false, bad);
});

test('framing: one Content-Length, or one Transfer-Encoding that is exactly chunked', () => {
  const auth: [string, string] = ['authorization', 'Bearer k'];
  assert.equal(checkHead(head([auth, ['content-length', '5']])), null);
  assert.equal(checkHead(head([auth, ['transfer-encoding', 'chunked']])), null);
  assert.equal(checkHead(head([auth, ['transfer-encoding', ' Chunked ']])), null);
  assert.equal(checkHead(head([auth])), null);
  assert.equal(checkHead(head([['content-length', '5'], ['content-length', '5']])), 'framing');
  assert.equal(checkHead(head([['content-length', '5'], ['content-length', '6']])), 'framing');
  assert.equal(checkHead(head([['transfer-encoding', 'chunked'], ['transfer-encoding', 'chunked']])), 'framing');
  for (const te of ['gzip, chunked', 'xchunked', 'chunked, identity', 'identity', '']) assert.equal(checkHead(head([['transfer-encoding', te]])), 'framing', te);
});

test('two Authorization or two Content-Type headers; framing is reported first', () => {
  assert.equal(checkHead(head([['authorization', 'Bearer a'], ['authorization', 'Bearer a']])), 'duplicate_authorization');
  assert.equal(checkHead(head([['content-type', 'application/json'], ['content-type', 'application/json']])), 'content_type');
  assert.equal(checkHead(head([['content-type', 'text/plain']])), 'content_type');
  assert.equal(checkHead(head([['content-type', 'application/json; charset=utf-8']])), null);
  assert.equal(checkHead(head([['authorization', 'a'], ['authorization', 'b'], ['content-length', '1'], ['content-length', '1']])), 'framing');
});

test('head size: the request line, each field as `name: value\\r\\n`, and the closing CRLF, as on the wire', () => {
  const fields: Array<[string, string]> = [['host', 'gw'], ['authorization', 'Bearer k'], ['x-pad', 'p'.repeat(100)]];
  const req = { ...head(fields), getQuery: () => 'a=1' } as unknown as HttpRequest;
  const wire = `POST /v1/chat/completions?a=1 HTTP/1.1\r\n${fields.map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n`;
  const line = requestLineBytes(req, 'POST', '/v1/chat/completions');
  assert.equal(line, 'POST /v1/chat/completions?a=1 HTTP/1.1\r\n'.length);
  assert.equal(headBytes(req, line), wire.length);
  assert.equal(checkHead(req, wire.length, line), null, 'a head of exactly the cap passes');
  assert.equal(checkHead(req, wire.length - 1, line), 'too_large');
  // Size is reported before framing: a head too large to trust is not read further.
  const both = { ...head([...fields, ['content-length', '1'], ['content-length', '2']]), getQuery: () => undefined } as unknown as HttpRequest;
  assert.equal(checkHead(both, 10, requestLineBytes(both, 'POST', '/v1/completions')), 'too_large');
  assert.equal(checkHead(both), 'framing');
});

test('keep-alive follows uWS: a Connection value of five characters (close, any case) closes', () => {
  const conn = (v: string): HttpRequest => ({ getHeader: (k: string) => (k === 'connection' ? v : '') }) as unknown as HttpRequest;
  assert.equal(keepsAlive(conn('')), true);
  assert.equal(keepsAlive(conn('keep-alive')), true);
  assert.equal(keepsAlive(conn('close')), false);
  assert.equal(keepsAlive(conn('Close')), false);
});
