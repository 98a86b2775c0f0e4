// The upstream client (src/upstream/upstream-client.ts) against scripted HTTP servers on loopback: keep-alive
// reuse, the per-replica connection bound and its queue, abort (active and queued), every failure kind the
// retry policy distinguishes, the timeouts, backpressure through pause/resume, and retiring a replica.
// Waits are conditions with a 10 s deadline that only a hang misses; a timeout is asserted not to fire early.
// How soon an abort reaches the replica is measured by `npm run bench -- upstream-abort`.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import type { Socket } from 'node:net';
import { OK, client, closeAll, recorder, req, scripted, until, within, type Result } from './scripted-upstream.ts';

after(closeAll);

const HANG_MS = 10_000;

test('sequential requests share one keep-alive connection and the server gets the exact request', async () => {
  const srv = await scripted((_r, sock, n) => sock.write(OK(`{"n":${n}}`)));
  const c = client();
  const body = '{"model":"m","messages":[{"role":"user","content":"héllo"}]}';
  for (let i = 1; i <= 3; i++) {
    const r = recorder();
    c.dispatch(srv.url, req(body), r.handler);
    const res = await r.done;
    assert.deepEqual([res.status, res.body, res.error], [200, `{"n":${i}}`, null]);
  }
  assert.equal(srv.connections, 1);
  const first = srv.requests[0]!;
  assert.ok(first.startsWith('POST /v1/chat/completions HTTP/1.1\r\n'), first);
  assert.match(first, new RegExp(`\r\nhost: 127\\.0\\.0\\.1:${srv.port}\r\n`));
  assert.match(first, /\r\nx-request-id: rid-1\r\n/);
  assert.match(first, new RegExp(`\r\ncontent-length: ${Buffer.byteLength(body)}\r\n`), 'content-length counts UTF-8 bytes');
  assert.ok(Buffer.from(first, 'latin1').toString('utf8').endsWith(body));
});

test('a chunked stream arrives chunk by chunk, before the response ends', async () => {
  let sockRef: Socket | null = null;
  const srv = await scripted((_r, sock) => {
    sockRef = sock;
    sock.write('HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n');
    sock.write('6\r\ndata: \r\n');
  });
  const c = client();
  const chunks: string[] = [];
  const r = recorder((ch) => chunks.push(ch.toString()));
  c.dispatch(srv.url, req(), r.handler);
  await until(() => chunks.length > 0, HANG_MS);
  assert.deepEqual(chunks, ['data: '], 'the first chunk is delivered while the stream is still open');
  sockRef!.write('8\r\n[DONE]\n\n\r\n0\r\n\r\n');
  const res = await r.done;
  assert.equal(res.body, 'data: [DONE]\n\n');
  assert.equal(res.error, null);
});

test('every callback of one socket read runs inside one batch() call, so a relay can send a read in one write', async () => {
  // 40 SSE events, each its own HTTP chunk, written in one write: they arrive in one read (or a few).
  const events = Array.from({ length: 40 }, (_, i) => `data: {"i":${i}}\n\n`);
  const body = events.map((e) => `${Buffer.byteLength(e).toString(16)}\r\n${e}\r\n`).join('') + '0\r\n\r\n';
  const srv = await scripted((_r, sock) => {
    sock.write(`HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n${body}`);
  });
  const c = client();
  let inBatch = false;
  let batches = 0;
  let outside = 0;
  const r = recorder(() => { if (!inBatch) outside++; });
  r.handler.batch = (parse) => {
    batches++;
    inBatch = true;
    try {
      parse();
    } finally {
      inBatch = false;
    }
  };
  c.dispatch(srv.url, req(), r.handler);
  const res = await r.done;
  assert.equal(res.error, null);
  assert.equal(res.body, events.join(''));
  assert.equal(res.chunks.length, 40, 'one onData per HTTP chunk');
  assert.equal(outside, 0, 'no onData outside a batch');
  assert.ok(batches >= 1 && batches <= 4, `one batch per read, not per chunk (${batches} batches for 40 chunks)`);
});

test('over connections_per_replica, attempts wait for a connection; a queued abort settles at once and never reaches the server', async () => {
  const held: Socket[] = [];
  const srv = await scripted((r, sock) => {
    if (r.includes('"hold"')) held.push(sock);
    else sock.write(OK('{}'));
  });
  const c = client({ connections_per_replica: 1 });
  const first = recorder();
  c.dispatch(srv.url, req('{"hold":1}'), first.handler);
  await until(() => held.length === 1, HANG_MS);
  const queued = recorder();
  const call = c.dispatch(srv.url, req('{"queued":1}'), queued.handler);
  const waiting = recorder();
  c.dispatch(srv.url, req('{"after":1}'), waiting.handler);
  assert.equal(srv.requests.length, 1, 'only the first request is on the wire');
  call.abort();
  const q = await within(queued.done, HANG_MS);
  assert.notEqual(q, 'timeout', 'the queued abort never settled');
  assert.equal((q as Result).error, 'aborted');
  // The one connection is still held (its headers timeout is 5 s away): the abort did not wait for it.
  assert.equal(first.result.settled, 0, 'settled without waiting for the connection');
  assert.equal(srv.requests.length, 1);
  held[0]!.write(OK('{"held":1}'));
  assert.equal((await first.done).body, '{"held":1}');
  assert.equal((await waiting.done).status, 200);
  assert.equal(srv.connections, 1, 'the waiting attempt reused the freed connection');
  assert.ok(!srv.requests.some((r) => r.includes('"queued"')), 'the aborted attempt was never sent');
});

test('aborting an attempt in flight closes its socket, which the replica sees', async () => {
  let closed = false;
  const srv = await scripted((_r, sock) => {
    sock.on('close', () => { closed = true; });
    sock.write('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n');
  });
  const c = client();
  let firstChunk = false;
  const r = recorder(() => { firstChunk = true; });
  // No timeout of the client's own can close this socket before the hang deadline: only the abort can.
  const call = c.dispatch(srv.url, req('{}', { headersTimeoutMs: 60_000, bodyTimeoutMs: 60_000 }), r.handler);
  await until(() => firstChunk, HANG_MS);
  assert.equal(closed, false);
  call.abort();
  assert.equal((await r.done).error, 'aborted');
  assert.equal(call.done, true);
  assert.equal(c.connections(srv.url), 0, 'the socket left the pool with the abort');
  await until(() => closed, HANG_MS);
  assert.ok(closed, 'the replica saw the connection close');
});

test('a refused connection is a connect failure', async () => {
  const srv = await scripted(() => undefined);
  const port = srv.port;
  await srv.close();
  const r = recorder();
  client().dispatch(`http://127.0.0.1:${port}`, req(), r.handler);
  const res = await r.done;
  assert.equal(res.error, 'connect');
  assert.equal(res.errorCode, 'ECONNREFUSED');
});

test('no response head within headersTimeoutMs is a headers_timeout; a stalled body is a body_timeout', async () => {
  const silent = await scripted(() => undefined);
  const c = client();
  const t0 = performance.now();
  const r = recorder();
  c.dispatch(silent.url, req('{}', { headersTimeoutMs: 300 }), r.handler);
  const res = await within(r.done, HANG_MS);
  assert.notEqual(res, 'timeout', 'headers_timeout never fired');
  assert.equal((res as Result).error, 'headers_timeout');
  const waited = (res as Result).settledAt - t0;
  assert.ok(waited >= 290, `fired after ${waited.toFixed(0)} ms, before the 300 ms timeout`);

  const stalls = await scripted((_r, sock) => sock.write('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n'));
  const b = recorder();
  c.dispatch(stalls.url, req('{}', { bodyTimeoutMs: 300 }), b.handler);
  const t1 = performance.now();
  const bres = await within(b.done, HANG_MS);
  assert.notEqual(bres, 'timeout', 'body_timeout never fired');
  assert.equal((bres as Result).error, 'body_timeout');
  assert.equal((bres as Result).body, 'abc');
  assert.ok((bres as Result).settledAt - t1 >= 290, 'not before the 300 ms body timeout');
});

test('the replica closing mid-body or before answering is a reset; garbage is refused', async () => {
  const cut = await scripted((_r, sock) => {
    sock.write('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n');
    setTimeout(() => sock.destroy(), 20);
  });
  const c = client();
  const r1 = recorder();
  c.dispatch(cut.url, req(), r1.handler);
  assert.deepEqual([(await r1.done).error, r1.result.body], ['reset', 'abc']);

  const hangup = await scripted((_r, sock) => sock.end());
  const r2 = recorder();
  c.dispatch(hangup.url, req(), r2.handler);
  assert.equal((await r2.done).error, 'reset');

  const garbage = await scripted((_r, sock) => sock.write('SSH-2.0-OpenSSH_9.2\r\n\r\n'));
  const r3 = recorder();
  c.dispatch(garbage.url, req(), r3.handler);
  const g = await r3.done;
  assert.equal(g.error, 'other');
  assert.equal(g.errorCode, 'UPSTREAM_BAD_RESPONSE');
});

test('a keep-alive connection the replica closed while idle is not reused', async () => {
  const srv = await scripted((_r, sock, n) => {
    sock.write(OK(`{"n":${n}}`));
    if (n === 1) setTimeout(() => sock.end(), 10);
  });
  const c = client();
  const r1 = recorder();
  c.dispatch(srv.url, req(), r1.handler);
  await r1.done;
  await until(() => c.connections(srv.url) === 0, HANG_MS);
  assert.equal(c.connections(srv.url), 0, 'the closed idle connection left the pool');
  const r2 = recorder();
  c.dispatch(srv.url, req(), r2.handler);
  const res = await r2.done;
  assert.deepEqual([res.error, res.body], [null, '{"n":2}']);
  assert.equal(srv.connections, 2);
});

test('pause stops reading the replica socket and resume reads the rest', async () => {
  const total = 16 * 1024 * 1024;
  let written = 0;
  const srv = await scripted((_r, sock) => {
    sock.write(`HTTP/1.1 200 OK\r\ncontent-length: ${total}\r\n\r\n`);
    const block = Buffer.alloc(64 * 1024, 0x61);
    const pump = (): void => {
      while (written < total) {
        written += block.length;
        if (!sock.write(block)) { sock.once('drain', pump); return; }
      }
    };
    pump();
  });
  const c = client();
  let received = 0;
  let paused = false;
  const r = recorder();
  const call = c.dispatch(srv.url, req(), {
    ...r.handler,
    onData: (chunk) => {
      received += chunk.length;
      if (!paused) { paused = true; call.pause(); }
    },
  });
  await new Promise((res) => setTimeout(res, 300));
  const whilePaused = received;
  assert.ok(whilePaused < total / 4, `read ${whilePaused} of ${total} bytes while paused`);
  assert.ok(written < total, 'the replica was held back by TCP flow control');
  call.resume();
  await r.done;
  assert.equal(received, total);
});

test('forget() lets the exchange in flight finish, then closes the connection instead of reusing it', async () => {
  const held: Socket[] = [];
  const srv = await scripted((_r, sock) => held.push(sock));
  const c = client();
  const r = recorder();
  c.dispatch(srv.url, req(), r.handler);
  await until(() => held.length === 1, HANG_MS);
  await c.forget(srv.url);
  held[0]!.write(OK('{"late":true}'));
  const res = await r.done;
  assert.deepEqual([res.error, res.body], [null, '{"late":true}']);
  let closed = false;
  held[0]!.on('close', () => { closed = true; });
  await until(() => closed, HANG_MS);
  assert.ok(closed, 'the retired connection was closed after its exchange');
});

test('a header value with CR or LF is refused before anything is written', async () => {
  const srv = await scripted((_r, sock) => sock.write(OK('{}')));
  assert.throws(() => client().dispatch(srv.url, req('{}', { headers: { 'x-request-id': 'a\r\nx-evil: 1' } }), recorder().handler), /CR or LF/);
  assert.equal(srv.requests.length, 0);
});
