// Regression tests of the upstream client: forget() with queued attempts, bytes
// after a complete response (never the next attempt's answer), a consumer's pause is not a body timeout, nor a
// body that keeps arriving, the
// headers timeout counts from the write, and a connect that hangs is a connect failure (src/upstream/README.md).
// A timeout that must fire is asserted not to fire early; above, only a 10 s hang deadline (HANG_MS).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import type { Socket } from 'node:net';
import type { UpstreamCall } from '../../../src/upstream/upstream-client.ts';
import { OK, blackhole, client, closeAll, recorder, req, scripted, until, within, type Result } from './scripted-upstream.ts';

after(closeAll);

const HANG_MS = 10_000;

test('forget() with attempts queued behind a busy connection: the queued attempt still runs once the busy exchange ends', async () => {
  const held: Socket[] = [];
  const srv = await scripted((r, sock) => {
    if (r.includes('"hold"')) held.push(sock);
    else sock.write(OK('{"queued":"answered"}'));
  });
  const c = client({ connections_per_replica: 1 });
  const first = recorder();
  c.dispatch(srv.url, req('{"hold":1}'), first.handler);
  await until(() => held.length === 1, HANG_MS);
  const queued = recorder();
  c.dispatch(srv.url, req('{"q":1}'), queued.handler);
  // The replica leaves the fleet (config reload) while one attempt is in flight and one is queued.
  await c.forget(srv.url);
  held[0]!.write(OK('{"held":1}'));
  assert.equal((await first.done).body, '{"held":1}');
  // README: "forget(url) ... closes idle connections now and busy ones when their exchange ends", and
  // retire(): "queued attempts still run". The queued attempt must get a connection (or at least settle).
  const q = await within(queued.done, HANG_MS);
  assert.notEqual(q, 'timeout', 'the queued attempt was stranded forever in the retired pool (neither run nor failed)');
  assert.equal((q as Result).body, '{"queued":"answered"}');
});

test('bytes after a complete response are never delivered to the next (queued) attempt as its response', async () => {
  const srv = await scripted((_r, sock, n) => {
    // A misbehaving replica: its first answer is followed, in the same write, by a second response nobody asked for.
    if (n === 1) sock.write(OK('{"n":1}') + OK('{"stale":true}'));
    else sock.write(OK(`{"n":${n}}`));
  });
  const c = client({ connections_per_replica: 1 });
  const a = recorder();
  const b = recorder();
  c.dispatch(srv.url, req('{"a":1}'), a.handler);
  c.dispatch(srv.url, req('{"b":1}'), b.handler); // queued: the one connection is busy
  assert.equal((await a.done).body, '{"n":1}');
  const rb = await within(b.done, HANG_MS);
  assert.notEqual(rb, 'timeout');
  // The parser's own contract: "Bytes after a complete response are an error too: nothing was asked."
  // Whatever happens to B (a fresh connection, or a failure), it must not get bytes the replica wrote
  // before it had even received B's request.
  assert.notEqual((rb as Result).body, '{"stale":true}', 'B got the stale response that preceded its own request on the wire');
});

test('bytes after a complete response are not fed to an attempt dispatched from inside onEnd', async () => {
  const srv = await scripted((_r, sock, n) => {
    if (n === 1) sock.write(OK('{"n":1}') + OK('{"stale":true}'));
    else sock.write(OK(`{"n":${n}}`));
  });
  const c = client({ connections_per_replica: 4 });
  const b = recorder();
  const a = recorder();
  c.dispatch(srv.url, req('{"a":1}'), {
    ...a.handler,
    onEnd: () => {
      a.handler.onEnd();
      // The next request of the same flow, dispatched synchronously: it takes the just-released connection.
      c.dispatch(srv.url, req('{"b":1}'), b.handler);
    },
  });
  assert.equal((await a.done).body, '{"n":1}');
  const rb = await within(b.done, HANG_MS);
  assert.notEqual(rb, 'timeout');
  assert.notEqual((rb as Result).body, '{"stale":true}', 'B got the stale response bytes that arrived before its request');
});

test('a consumer pause longer than bodyTimeoutMs is not a body_timeout: the body is read after resume', async () => {
  const srv = await scripted((_r, sock) => {
    sock.write('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nfirst\r\n');
    // The replica is prompt: the rest follows 30 ms later and sits in the kernel while the gateway is paused.
    setTimeout(() => sock.write('4\r\nrest\r\n0\r\n\r\n'), 30);
  });
  const c = client();
  const r = recorder();
  let pausedOnce = false;
  const call: UpstreamCall = c.dispatch(srv.url, req('{}', { bodyTimeoutMs: 300 }), {
    ...r.handler,
    onData: (chunk) => {
      r.handler.onData(chunk);
      if (!pausedOnce) {
        // The client downstream is backpressured (SseRelay -> UpstreamAttempt.push -> call.pause()).
        pausedOnce = true;
        call.pause();
        setTimeout(() => call.resume(), 700);
      }
    },
  });
  const res = await r.done;
  // undici, the stock Node client, never fires its body timeout while paused and refreshes it on resume
  // (client-h1.js onParserTimeout: `if (!paused)`; resume(): timeout.refresh()). Here the sweeper
  // blames the replica for the gateway's own backpressure.
  assert.deepEqual([res.error, res.body], [null, 'firstrest'], `got ${res.error} after ${res.body.length} bytes`);
});

test('a body that keeps arriving is never a body_timeout, however long it runs past bodyTimeoutMs', async () => {
  // A read only flags the connection; the 100 ms sweeper stamps the time (h1-connection.ts, lastActivity). A
  // stream whose chunks come every 40 ms for 1.2 s, with bodyTimeoutMs 300, must complete: each sweep sees the
  // reads since the last one.
  const srv = await scripted((_r, sock) => {
    sock.write('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n');
    let n = 0;
    const t = setInterval(() => {
      if (++n <= 30) {
        sock.write('1\r\nx\r\n');
        return;
      }
      clearInterval(t);
      sock.write('0\r\n\r\n');
    }, 40);
  });
  const c = client();
  const r = recorder();
  c.dispatch(srv.url, req('{}', { bodyTimeoutMs: 300 }), r.handler);
  const res = await r.done;
  assert.deepEqual([res.error, res.body], [null, 'x'.repeat(30)], `got ${res.error} after ${res.body.length} bytes`);
});

test('headersTimeoutMs counts from the write: a head trickled one byte per read still times out', async () => {
  const head = 'HTTP/1.1 200 OK\r\nx-padding: ' + 'p'.repeat(200) + '\r\ncontent-length: 2\r\n\r\nok';
  const srv = await scripted((_r, sock) => {
    let i = 0;
    const t = setInterval(() => {
      if (sock.destroyed || i >= head.length) { clearInterval(t); return; }
      sock.write(head[i++]!);
    }, 20);
  });
  const c = client();
  const r = recorder();
  const t0 = performance.now();
  c.dispatch(srv.url, req('{}', { headersTimeoutMs: 300 }), r.handler);
  // The whole head takes about 5 s to trickle in: a timer restarted by every read would let it complete.
  const res = await within(r.done, HANG_MS);
  assert.notEqual(res, 'timeout', 'no headers_timeout at all while the head trickles in');
  // README: "headers_timeout when no response head arrives within headersTimeoutMs of the write".
  assert.equal((res as Result).error, 'headers_timeout');
  assert.ok((res as Result).settledAt - t0 >= 290, 'not before the 300 ms timeout');
});

test('a connect that never completes fails as connect (UPSTREAM_CONNECT_TIMEOUT) after connect_timeout_ms', async () => {
  const bh = await blackhole();
  const c = client({ connect_timeout_ms: 300 });
  const r = recorder();
  const t0 = performance.now();
  // Headers and body timeouts far beyond the hang deadline: only the connect timeout can end this attempt.
  c.dispatch(bh.url, req('{}', { headersTimeoutMs: 60_000, bodyTimeoutMs: 60_000 }), r.handler);
  const settled = await within(r.done, HANG_MS);
  assert.notEqual(settled, 'timeout', 'the connect timeout never fired');
  const res = settled as Result;
  assert.deepEqual([res.error, res.errorCode], ['connect', 'UPSTREAM_CONNECT_TIMEOUT']);
  const waited = res.settledAt - t0;
  assert.ok(waited >= 290, `fired after ${waited.toFixed(0)} ms, before the 300 ms connect timeout`);
  assert.equal(c.connections(bh.url), 0);
});

test('a connect still pending when headersTimeoutMs runs out is a connect failure, not headers_timeout', async () => {
  const bh = await blackhole();
  const c = client({ connect_timeout_ms: 800 });
  const r = recorder();
  // e.g. first_token_timeout_ms: 500 makes streams' headersTimeoutMs 1500 < a 2000 ms connect timeout.
  c.dispatch(bh.url, req('{}', { headersTimeoutMs: 200 }), r.handler);
  const settled = await within(r.done, HANG_MS);
  assert.notEqual(settled, 'timeout', 'the attempt never settled');
  const res = settled as Result;
  // README: "Any error before the TCP connection is up is `connect` (refused, unreachable, connect timeout)".
  // headers_timeout is not reported as a data-plane failure by handle-completion, so an unreachable replica
  // would never be marked down.
  assert.equal(res.error, 'connect', `reported ${res.error} (${res.errorCode}) for a replica that never accepted the TCP connection`);
});

test('waiting in the queue counts against headersTimeoutMs: a non-stream attempt cannot wait for a connection forever', async () => {
  const held: Socket[] = [];
  const srv = await scripted((_r, sock) => held.push(sock));
  const c = client({ connections_per_replica: 1 });
  const busy = recorder();
  // The busy exchange outlives the hang deadline, so the queued attempt cannot get its connection in time.
  c.dispatch(srv.url, req('{"busy":1}', { headersTimeoutMs: 60_000 }), busy.handler);
  await until(() => held.length === 1, HANG_MS);
  const t0 = performance.now();
  const queued = recorder();
  c.dispatch(srv.url, req('{"queued":1}', { headersTimeoutMs: 300 }), queued.handler);
  const res = await within(queued.done, HANG_MS);
  assert.notEqual(res, 'timeout', 'the queued attempt was never settled');
  assert.equal((res as Result).error, 'headers_timeout');
  assert.ok((res as Result).settledAt - t0 >= 290, 'not before the 300 ms timeout');
  assert.equal(srv.requests.length, 1, 'the timed-out attempt was never written');
  held[0]!.write(OK('{}'));
  assert.equal((await busy.done).status, 200);
});

test('a dispatch after close() fails at once with aborted and opens no connection', async () => {
  const srv = await scripted((_r, sock) => sock.write(OK('{}')));
  const c = client();
  await c.close();
  const r = recorder();
  c.dispatch(srv.url, req(), r.handler);
  // At once: settled before the event loop's next turn, so before any socket could have been opened.
  let turned = false;
  setImmediate(() => { turned = true; });
  const res = await within(r.done, HANG_MS);
  assert.equal(turned, false, 'settled without waiting on I/O');
  assert.notEqual(res, 'timeout');
  assert.equal((res as Result).error, 'aborted');
  await new Promise((resolve) => setTimeout(resolve, 50));
  assert.equal(srv.connections, 0);
  assert.equal(c.connections(srv.url), 0);
});
