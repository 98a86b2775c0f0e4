// The upstream client's edges over real sockets: abort from inside every callback and while connecting or
// queued (exactly one onError, nothing after it), pause around completion, the connection bound and its FIFO,
// connect failures with a queue, close() with work in flight, keep-alive expiry, RSTs, and HTTP framing
// (interim responses, chunk extensions, trailers, until-close, bodies larger than the read buffer).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import type { Socket } from 'node:net';
import { UpstreamClient, type UpstreamCall } from '../../../src/upstream/upstream-client.ts';
import { OK, client, closeAll, recorder, req, scripted, sleep, until, within, type Result } from './scripted-upstream.ts';

after(closeAll);

test('abort() inside onStart: exactly one onError(aborted), no onData, no onEnd, for 204, CL:0 and a body in the same read', async () => {
  const answers = [
    'HTTP/1.1 204 No Content\r\n\r\n',
    'HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n',
    'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n3\r\ndef\r\n0\r\n\r\n',
    OK('{"whole":true}'),
  ];
  const srv = await scripted((_r, sock, n) => sock.write(answers[(n - 1) % answers.length]!));
  const c = client({ connections_per_replica: 1 });
  for (let i = 0; i < answers.length; i++) {
    const r = recorder();
    const call: UpstreamCall = c.dispatch(srv.url, req(), { ...r.handler, onStart: (s) => { r.handler.onStart(s); call.abort(); call.abort(); } });
    const res = await r.done;
    await sleep(20);
    assert.deepEqual([res.error, res.settled, res.body, res.lateCalls, call.done], ['aborted', 1, '', 0, true], `answer ${i}`);
    assert.equal(c.connections(srv.url), 0, 'the aborted connection is not kept');
  }
  assert.equal(srv.connections, answers.length, 'every abort cost its connection');
  const ok = recorder();
  c.dispatch(srv.url, req(), ok.handler);
  assert.equal((await ok.done).status, 204);
});

test('abort() inside onData with more chunks and the terminator in the same read: nothing after the abort', async () => {
  const srv = await scripted((_r, sock) => sock.write('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n3\r\ndef\r\n0\r\n\r\n'));
  const c = client({ connections_per_replica: 1 });
  const r = recorder();
  const call: UpstreamCall = c.dispatch(srv.url, req(), { ...r.handler, onData: (ch) => { r.handler.onData(ch); call.abort(); } });
  const res = await r.done;
  await sleep(30);
  assert.deepEqual([res.error, res.settled, res.body, res.lateCalls], ['aborted', 1, 'abc', 0]);
  assert.equal(c.connections(srv.url), 0);
});

test('abort() inside onData of a Content-Length body on its last bytes: onError only, never onEnd', async () => {
  const srv = await scripted((_r, sock) => sock.write(OK('0123456789')));
  const c = client();
  const r = recorder();
  const call: UpstreamCall = c.dispatch(srv.url, req(), { ...r.handler, onData: (ch) => { r.handler.onData(ch); call.abort(); } });
  const res = await r.done;
  await sleep(30);
  assert.deepEqual([res.error, res.settled, res.body], ['aborted', 1, '0123456789']);
  assert.equal(c.connections(srv.url), 0);
});

test('abort() right after dispatch (still connecting): aborted once, nothing reaches the server, the slot is freed for the queue', async () => {
  const srv = await scripted((_r, sock) => sock.write(OK('{}')));
  const c = client({ connections_per_replica: 1 });
  const a = recorder();
  const call = c.dispatch(srv.url, req('{"a":1}'), a.handler);
  const b = recorder();
  c.dispatch(srv.url, req('{"b":1}'), b.handler);
  call.abort();
  const ra = await a.done;
  assert.deepEqual([ra.error, ra.settled], ['aborted', 1]);
  const rb = await b.done;
  assert.deepEqual([rb.error, rb.body], [null, '{}']);
  await sleep(30);
  assert.equal(ra.settled, 1);
  assert.ok(!srv.requests.some((x) => x.includes('"a":1')), 'the aborted request was never written');
  assert.ok(c.connections(srv.url) <= 1);
});

test('abort() after onEnd is a no-op and leaves the keep-alive connection for the next attempt', async () => {
  const srv = await scripted((_r, sock, n) => sock.write(OK(`{"n":${n}}`)));
  const c = client();
  const r = recorder();
  const call = c.dispatch(srv.url, req(), r.handler);
  await r.done;
  call.abort();
  call.pause();
  call.resume();
  await sleep(20);
  assert.deepEqual([r.result.settled, r.result.error], [1, null]);
  const r2 = recorder();
  c.dispatch(srv.url, req(), r2.handler);
  assert.equal((await r2.done).body, '{"n":2}');
  assert.equal(srv.connections, 1);
});

test('a response that completes while the consumer has paused: the connection is reused and the next answer is read', async () => {
  const srv = await scripted((_r, sock, n) => sock.write(OK(`{"n":${n}}`)));
  const c = client({ connections_per_replica: 1 });
  for (let i = 1; i <= 3; i++) {
    const r = recorder();
    // Pause inside the last chunk and never resume (SseRelay would wait for a drain that never comes).
    const call: UpstreamCall = c.dispatch(srv.url, req(), { ...r.handler, onData: (ch) => { r.handler.onData(ch); call.pause(); } });
    const res = await within(r.done, 1000);
    assert.notEqual(res, 'timeout', `request ${i} stalled on a connection left paused`);
    assert.equal((res as Result).body, `{"n":${i}}`);
  }
  assert.equal(srv.connections, 1);
});

test('an attempt paused while queued stays paused on its connection until resume', async () => {
  const held: Socket[] = [];
  const srv = await scripted((r, sock) => {
    if (r.includes('"hold"')) held.push(sock);
    else sock.write(OK('{"q":1}'));
  });
  const c = client({ connections_per_replica: 1 });
  const a = recorder();
  c.dispatch(srv.url, req('{"hold":1}'), a.handler);
  await until(() => held.length === 1);
  const b = recorder();
  const callB = c.dispatch(srv.url, req('{"b":1}'), b.handler);
  callB.pause();
  held[0]!.write(OK('{"a":1}'));
  await a.done;
  await sleep(150);
  assert.equal(b.result.body, '', 'nothing read while paused');
  callB.resume();
  assert.equal((await b.done).body, '{"q":1}');
});

test('connect failures with queued attempts: every attempt settles once as connect, and no connection leaks', async () => {
  const srv = await scripted(() => undefined);
  const port = srv.port;
  await srv.close();
  const c = client({ connections_per_replica: 2 });
  const url = `http://127.0.0.1:${port}`;
  const rs = Array.from({ length: 7 }, () => recorder());
  for (const r of rs) c.dispatch(url, req(), r.handler);
  const res = await within(Promise.all(rs.map((r) => r.done)), 3000);
  assert.notEqual(res, 'timeout', 'an attempt was stranded in the queue');
  for (const r of res as Result[]) assert.deepEqual([r.error, r.settled], ['connect', 1]);
  await sleep(20);
  assert.equal(c.connections(url), 0);
});

test('the pool never opens more than connections_per_replica and drains its queue FIFO', async () => {
  const order: number[] = [];
  const srv = await scripted((r, sock) => {
    const n = Number(/"i":(\d+)/.exec(r)![1]);
    order.push(n);
    setTimeout(() => sock.write(OK(`{"i":${n}}`)), 10);
  });
  const c = client({ connections_per_replica: 3 });
  const rs = Array.from({ length: 12 }, (_, i) => {
    const r = recorder();
    c.dispatch(srv.url, req(`{"i":${i}}`), r.handler);
    return r;
  });
  assert.equal(c.connections(srv.url), 3);
  const res = await Promise.all(rs.map((r) => r.done));
  res.forEach((r, i) => assert.equal(r.body, `{"i":${i}}`));
  assert.ok(srv.maxOpen <= 3 && srv.connections === 3, `opened ${srv.connections}, ${srv.maxOpen} at once`);
  assert.deepEqual(order.slice(3), [3, 4, 5, 6, 7, 8, 9, 10, 11], 'queued attempts went out in FIFO order');
  assert.equal(c.connections(srv.url), 3);
});

test('connection: close answers free their slot for the queue and are never reused', async () => {
  const srv = await scripted((_r, sock, n) => sock.end(`HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 3\r\n\r\n#${String(n).padStart(2, '0')}`));
  const c = client({ connections_per_replica: 2 });
  const rs = Array.from({ length: 6 }, () => recorder());
  for (const r of rs) c.dispatch(srv.url, req(), r.handler);
  const res = await Promise.all(rs.map((r) => r.done));
  for (const r of res) assert.equal(r.error, null);
  assert.equal(srv.connections, 6);
  await sleep(20);
  assert.equal(c.connections(srv.url), 0);
});

test('close() settles active and queued attempts once with aborted and leaves no connection', async () => {
  const held: Socket[] = [];
  const srv = await scripted((_r, sock) => { held.push(sock); sock.write('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n1\r\nx\r\n'); });
  const c = new UpstreamClient({ connect_timeout_ms: 1000, connections_per_replica: 2 });
  const rs = Array.from({ length: 4 }, () => recorder());
  for (const r of rs) c.dispatch(srv.url, req(), r.handler);
  await until(() => held.length === 2);
  await c.close();
  const res = await Promise.all(rs.map((r) => r.done));
  for (const r of res) assert.deepEqual([r.error, r.settled], ['aborted', 1]);
  await sleep(30);
  for (const r of res) assert.equal(r.settled, 1);
  assert.equal(c.connections(srv.url), 0);
  await until(() => srv.open === 0, 1000);
  assert.equal(srv.open, 0, 'the server saw every connection close');
});

test('an idle keep-alive connection is closed after 4 s idle', async () => {
  const srv = await scripted((_r, sock) => sock.write(OK('{}')));
  const c = client();
  const r = recorder();
  c.dispatch(srv.url, req(), r.handler);
  await r.done;
  assert.equal(c.connections(srv.url), 1);
  await sleep(3700);
  assert.equal(c.connections(srv.url), 1, 'still idle-reusable before 4 s');
  await until(() => c.connections(srv.url) === 0, 800);
  assert.equal(c.connections(srv.url), 0);
});

test('a server RST mid-body is reset; an RST while idle removes the connection', async () => {
  const srv = await scripted((r, sock) => {
    if (r.includes('"cut"')) {
      sock.write('HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nabc');
      setTimeout(() => sock.resetAndDestroy(), 20);
    } else {
      sock.write(OK('{}'));
      setTimeout(() => sock.resetAndDestroy(), 20);
    }
  });
  const c = client();
  const a = recorder();
  c.dispatch(srv.url, req('{"cut":1}'), a.handler);
  const ra = await a.done;
  assert.deepEqual([ra.error, ra.body, ra.settled], ['reset', 'abc', 1]);
  const b = recorder();
  c.dispatch(srv.url, req('{"idle":1}'), b.handler);
  await b.done;
  await until(() => c.connections(srv.url) === 0, 500);
  assert.equal(c.connections(srv.url), 0);
});

test('HTTP edge cases over a socket: 100 Continue, chunk extensions and trailers, HTTP/1.0 until close, CL:0 reuse', async () => {
  const answers = [
    'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </x>\r\n\r\n' + OK('{"after1xx":1}'),
    'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;name=val\r\nabc\r\n2 ; x\r\nde\r\n0\r\nx-trailer: 1\r\nx-other: 2\r\n\r\n',
    'HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n',
    'HTTP/1.1 200 OK\r\nCONTENT-LENGTH: 4\r\n\r\nlast',
  ];
  const srv = await scripted((_r, sock, n) => sock.write(answers[n - 1]!));
  const c = client({ connections_per_replica: 1 });
  const bodies: string[] = [];
  for (let i = 0; i < answers.length; i++) {
    const r = recorder();
    c.dispatch(srv.url, req(), r.handler);
    const res = await r.done;
    assert.equal(res.error, null, `answer ${i}: ${res.errorCode}`);
    bodies.push(res.body);
  }
  assert.deepEqual(bodies, ['{"after1xx":1}', 'abcde', '', 'last']);
  assert.equal(srv.connections, 1, 'every answer left the connection reusable');

  const h10 = await scripted((_r, sock) => sock.end('HTTP/1.0 200 OK\r\ncontent-type: text/plain\r\n\r\nuntil close'));
  const r = recorder();
  c.dispatch(h10.url, req(), r.handler);
  const res = await r.done;
  assert.deepEqual([res.error, res.body], [null, 'until close']);
  await sleep(20);
  assert.equal(c.connections(h10.url), 0);
});

test('a large chunked body with chunks bigger than the 64 KiB read buffer arrives byte-exact', async () => {
  const parts = [Buffer.alloc(300 * 1024), Buffer.alloc(1), Buffer.alloc(70 * 1024), Buffer.alloc(1024 * 1024)];
  let seed = 1;
  for (const p of parts) for (let i = 0; i < p.length; i++) { seed = (seed * 1103515245 + 12345) & 0x7fffffff; p[i] = 0x20 + (seed % 90); }
  const expected = Buffer.concat(parts);
  const srv = await scripted((_r, sock) => {
    sock.write('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n');
    for (const p of parts) sock.write(Buffer.concat([Buffer.from(`${p.length.toString(16)}\r\n`), p, Buffer.from('\r\n')]));
    sock.write('0\r\n\r\n');
  });
  const c = client();
  const got: Buffer[] = [];
  const r = recorder();
  c.dispatch(srv.url, req(), { ...r.handler, onData: (ch) => { got.push(Buffer.from(ch)); } });
  const res = await r.done;
  assert.equal(res.error, null);
  assert.ok(Buffer.concat(got).equals(expected));
});

test('a chunk view is only valid during onData: the next read reuses the memory (why consumers must copy)', async () => {
  const srv = await scripted((_r, sock) => {
    sock.write('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n');
    setTimeout(() => sock.write('5\r\nAAAAA\r\n'), 30);
    setTimeout(() => sock.end('5\r\nBBBBB\r\n0\r\n\r\n'), 60);
  });
  const c = client();
  const views: Buffer[] = [];
  const copies: string[] = [];
  const r = recorder();
  c.dispatch(srv.url, req(), { ...r.handler, onData: (ch) => { views.push(ch); copies.push(ch.toString()); } });
  await r.done;
  assert.deepEqual(copies, ['AAAAA', 'BBBBB']);
  assert.notEqual(views[0]!.toString(), 'AAAAA', 'the first view was overwritten by a later read');
});

test('pause() while still connecting holds the response until resume(); an until-close body completes after resume', async () => {
  const srv = await scripted((_r, sock) => sock.end('HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\nuntil-close body'));
  const c = client();
  const r = recorder();
  const call = c.dispatch(srv.url, req(), r.handler);
  call.pause();
  await until(() => srv.requests.length === 1);
  await sleep(150);
  assert.deepEqual([r.result.status, r.result.body, r.result.settled], [0, '', 0], 'nothing read while paused');
  call.resume();
  const res = await r.done;
  assert.deepEqual([res.error, res.status, res.body], [null, 200, 'until-close body']);
  await sleep(20);
  assert.equal(c.connections(srv.url), 0);
});
