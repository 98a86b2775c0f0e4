// The upstream HTTP/1.1 response parser: every framing vLLM (uvicorn) uses, fed whole and split at every byte
// boundary (a socket read can end anywhere), plus the malformed inputs it must refuse instead of guessing.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MAX_HEAD_BYTES } from '../../../src/upstream/h1-response-parser.ts';
import { parser, type Seen } from './recording-parser.ts';


/** Feeds `wire` in pieces cut at `cuts`, through a reused scratch buffer (as the shared socket buffer is). */
function feedSplit(wire: string, cuts: number[]): Seen {
  const { p, seen } = parser();
  const bytes = Buffer.from(wire, 'latin1');
  const scratch = Buffer.alloc(bytes.length + 16);
  let from = 0;
  for (const cut of [...cuts, bytes.length]) {
    const to = Math.min(cut, bytes.length);
    if (to <= from) continue;
    scratch.fill(0x58); // anything the parser kept as a view instead of a copy would now read as X
    bytes.copy(scratch, 3, from, to);
    const err = p.feed(scratch, 3, 3 + (to - from));
    if (err !== null) { seen.error = err; break; }
    from = to;
  }
  if (seen.error === null && seen.completes.length === 0) seen.error = p.eof();
  return seen;
}

const SSE_BODY = 'data: {"choices":[{"delta":{"content":"Hi"}}]}\n\ndata: [DONE]\n\n';
const CHUNKED = 'HTTP/1.1 200 OK\r\ndate: Mon, 30 Nov 2026 07:00:00 GMT\r\nserver: uvicorn\r\ncontent-type: text/event-stream; charset=utf-8\r\nTransfer-Encoding: chunked\r\n\r\n'
  + `${(SSE_BODY.length - 14).toString(16)}\r\n${SSE_BODY.slice(0, -14)}\r\n` + `e;ext=1\r\n${SSE_BODY.slice(-14)}\r\n0\r\n\r\n`;
const LENGTH = 'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nContent-Length: 17\r\n\r\n{"id":"cmpl-1"}\n\n';

test('a chunked SSE response, split at every byte, yields the same body and one keep-alive completion', () => {
  for (let cut = 0; cut <= CHUNKED.length; cut++) {
    const s = feedSplit(CHUNKED, [cut]);
    assert.equal(s.error, null, `cut at ${cut}`);
    assert.deepEqual(s.status, [200], `cut at ${cut}`);
    assert.equal(s.body, SSE_BODY, `cut at ${cut}`);
    assert.deepEqual(s.completes, [true], `cut at ${cut}`);
  }
});

test('a chunked response fed one byte per read still parses', () => {
  const cuts = Array.from({ length: CHUNKED.length }, (_, i) => i);
  const s = feedSplit(CHUNKED, cuts);
  assert.equal(s.error, null);
  assert.equal(s.body, SSE_BODY);
  assert.deepEqual(s.completes, [true]);
});

test('a Content-Length response split anywhere yields exactly its length', () => {
  for (let cut = 0; cut <= LENGTH.length; cut++) {
    const s = feedSplit(LENGTH, [cut, cut + 7]);
    assert.equal(s.error, null);
    assert.equal(s.body, '{"id":"cmpl-1"}\n\n');
    assert.deepEqual(s.completes, [true]);
  }
});

test('connection: close and HTTP/1.0 responses complete without keep-alive', () => {
  assert.deepEqual(feedSplit(LENGTH.replace('\r\n\r\n', '\r\nConnection: close\r\n\r\n'), []).completes, [false]);
  assert.deepEqual(feedSplit(LENGTH.replace('HTTP/1.1', 'HTTP/1.0'), []).completes, [false]);
  assert.deepEqual(feedSplit(LENGTH.replace('HTTP/1.1', 'HTTP/1.0').replace('\r\n\r\n', '\r\nconnection: keep-alive\r\n\r\n'), []).completes, [true]);
});

test('a response with neither length nor chunked runs until the peer closes', () => {
  const s = feedSplit('HTTP/1.1 500 Internal Server Error\r\ncontent-type: text/plain\r\n\r\nboom', []);
  assert.equal(s.error, null);
  assert.deepEqual(s.status, [500]);
  assert.equal(s.body, 'boom');
  assert.deepEqual(s.completes, [false]);
});

test('1xx interim responses are skipped; 204 has no body; trailers are skipped', () => {
  const s = feedSplit(`HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\n${LENGTH}`, [5, 30]);
  assert.deepEqual(s.status, [200]);
  assert.equal(s.body, '{"id":"cmpl-1"}\n\n');
  const n = feedSplit('HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n', []);
  assert.deepEqual([n.status, n.body, n.completes], [[204], '', [true]]);
  const t = feedSplit('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nx-trailer: 1\r\nx-other: 2\r\n\r\n', [60, 61, 70]);
  assert.equal(t.error, null);
  assert.deepEqual([t.body, t.completes], ['abc', [true]]);
});

test('reset() lets one parser read a second response on the same connection', () => {
  const { p, seen } = parser();
  const b = Buffer.from(LENGTH, 'latin1');
  assert.equal(p.feed(b, 0, b.length), null);
  assert.equal(p.complete, true);
  p.reset();
  assert.equal(p.started, false);
  assert.equal(p.feed(b, 0, b.length), null);
  assert.deepEqual(seen.completes, [true, true]);
});

test('a cut stream is reported at EOF, before and after the head', () => {
  assert.equal(feedSplit('', []).error, 'connection closed before a response');
  assert.equal(feedSplit(CHUNKED.slice(0, CHUNKED.indexOf('data') + 10), []).error, 'connection closed mid-response');
  assert.equal(feedSplit(LENGTH.slice(0, -3), []).error, 'connection closed mid-response');
});

test('malformed responses are refused, not guessed at', () => {
  const bad: Array<[string, string]> = [
    ['not http', 'SSH-2.0-OpenSSH\r\n\r\n'],
    ['bad status', 'HTTP/1.1 2x0 OK\r\ncontent-length: 0\r\n\r\n'],
    ['header without colon', 'HTTP/1.1 200 OK\r\nbogus\r\n\r\n'],
    ['two different lengths', 'HTTP/1.1 200 OK\r\ncontent-length: 3\r\ncontent-length: 4\r\n\r\nabcd'],
    ['non-numeric length', 'HTTP/1.1 200 OK\r\ncontent-length: -1\r\n\r\n'],
    ['unframeable transfer-encoding', 'HTTP/1.1 200 OK\r\ntransfer-encoding: gzip\r\n\r\n'],
    ['bad chunk size', 'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n'],
    ['chunk data overruns its size', 'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n'],
    ['bare LF after the size', 'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\nabc\r\n0\r\n\r\n'],
    ['bytes after the response', `${LENGTH}HTTP/1.1 200 OK\r\n`],
    ['switching protocols', 'HTTP/1.1 101 Switching Protocols\r\n\r\n'],
  ];
  for (const [name, wire] of bad) {
    const s = feedSplit(wire, []);
    assert.notEqual(s.error, null, name);
    assert.ok(!s.error!.startsWith('connection closed'), `${name}: refused while parsing, not at EOF (${s.error})`);
  }
});

test('a header block or size line that never ends is refused at its limit instead of growing', () => {
  const { p } = parser();
  const filler = Buffer.from(`HTTP/1.1 200 OK\r\nx-pad: ${'a'.repeat(MAX_HEAD_BYTES)}`, 'latin1');
  let err: string | null = null;
  for (let at = 0; at < filler.length && err === null; at += 4096) err = p.feed(filler, at, Math.min(filler.length, at + 4096));
  assert.equal(err, 'malformed response head');
  const { p: q } = parser();
  const head = Buffer.from('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n', 'latin1');
  assert.equal(q.feed(head, 0, head.length), null);
  const digits = Buffer.from('0'.repeat(2000), 'latin1');
  assert.equal(q.feed(digits, 0, digits.length), 'malformed chunk size');
});
