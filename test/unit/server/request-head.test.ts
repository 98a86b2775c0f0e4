// The head checks uWS leaves to the gateway (src/server/request-head.ts): which header lists make a completion
// request's framing ambiguous, its key ambiguous, or its media type wrong. The live answers (400 and a closed
// connection, 401, 415) are in test/integration/gateway/hostile-corpus.test.ts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { checkHead, isJsonMediaType } from '../../../src/server/request-head.ts';
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
