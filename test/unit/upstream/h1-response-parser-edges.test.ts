// Response parser edges: the shared socket buffer holds stale bytes of earlier reads after `end`, so every
// scan must stop at `end` (h1-response-parser.test.ts fills its scratch with 'X', which never contains CR or
// LF); chunked beats Content-Length; 304; HTTP/1.0 keep-alive; bytes after a response; status-line syntax.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parser, type Seen } from './recording-parser.ts';


/** Feeds `wire` cut at every byte boundary through a scratch buffer whose bytes after `end` are `stale`. */
function feedWithStale(wire: string, stale: string): Seen[] {
  const bytes = Buffer.from(wire, 'latin1');
  const out: Seen[] = [];
  for (let cut = 1; cut < bytes.length; cut++) {
    const { p, seen } = parser();
    const scratch = Buffer.alloc(bytes.length + stale.length + 8);
    let err: string | null = null;
    for (const [from, to] of [[0, cut], [cut, bytes.length]] as const) {
      scratch.fill(0);
      bytes.copy(scratch, 0, from, to);
      scratch.write(stale, to - from, 'latin1');
      err = p.feed(scratch, 0, to - from);
      if (err !== null) break;
    }
    seen.error = err ?? (seen.completes.length === 0 ? p.eof() : null);
    out.push(seen);
  }
  return out;
}

test('stale CR/LF bytes after `end` in the shared buffer never end a head, a size line or trailers early', () => {
  const wire = 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nx-a: b\r\n\r\n5;e=1\r\nhello\r\n0\r\nx-t: 1\r\n\r\n';
  for (const stale of ['\r\n\r\n', '\n\r\n', '\r\n', '\n', '0\r\n\r\n']) {
    feedWithStale(wire, stale).forEach((s, i) => {
      assert.deepEqual([s.error, s.status, s.body, s.completes], [null, [200], 'hello', [true]], `cut ${i + 1}, stale ${JSON.stringify(stale)}`);
    });
  }
});

test('both Transfer-Encoding: chunked and Content-Length: chunked framing wins', () => {
  const { p, seen } = parser();
  const w = Buffer.from('HTTP/1.1 200 OK\r\ncontent-length: 3\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n', 'latin1');
  assert.equal(p.feed(w, 0, w.length), null);
  assert.deepEqual([seen.body, seen.completes.length], ['hello', 1]);
});

test('304 completes without a body; HTTP/1.0 with keep-alive and a length stays reusable', () => {
  const a = parser();
  const w1 = Buffer.from('HTTP/1.1 304 Not Modified\r\ncontent-length: 10\r\n\r\n', 'latin1');
  assert.equal(a.p.feed(w1, 0, w1.length), null);
  assert.deepEqual([a.seen.body, a.seen.completes], ['', [true]]);
  const b = parser();
  const w2 = Buffer.from('HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 2\r\n\r\nok', 'latin1');
  assert.equal(b.p.feed(w2, 0, w2.length), null);
  assert.deepEqual([b.seen.body, b.seen.completes], ['ok', [true]]);
});

test('bytes after a complete response in the same feed are refused', () => {
  const { p, seen } = parser();
  const w = Buffer.from('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nokEXTRA', 'latin1');
  assert.match(p.feed(w, 0, w.length) ?? '', /after a complete response/);
  assert.deepEqual([seen.body, seen.completes], ['ok', [true]]);
});

test('a status code must be three digits followed by a space or the line end', () => {
  for (const line of ['HTTP/1.1 2e2 OK', 'HTTP/1.1 20 OK', 'HTTP/1.1 2000 OK', 'HTTP/1.1 0x1 OK', 'HTTP/1.1 099 Low']) {
    const { p } = parser();
    const b = Buffer.from(`${line}\r\ncontent-length: 0\r\n\r\n`, 'latin1');
    assert.notEqual(p.feed(b, 0, b.length), null, line);
  }
  const { p, seen } = parser();
  const ok = Buffer.from('HTTP/1.1 200\r\ncontent-length: 0\r\n\r\n', 'latin1');
  assert.equal(p.feed(ok, 0, ok.length), null, 'a status line without a reason phrase is valid');
  assert.deepEqual(seen.completes, [true]);
});
