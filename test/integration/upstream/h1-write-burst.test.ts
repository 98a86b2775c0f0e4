// The upstream client writes a loop turn's requests together at the end of that turn (h1-connection.ts,
// WRITE_QUEUE). What a user of the client must still see: every request reaches its own replica connection
// and gets its own answer, however many are made in one turn (past the queue's cap too); a request aborted
// in the turn that made it is never written, even on a warm keep-alive connection; and nothing waits for a
// later turn than the one after it.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { OK, client, closeAll, processReplica, recorder, req, scripted, sleep, spin } from './scripted-upstream.ts';

after(closeAll);

test('200 requests dispatched in one turn (past the 64-write cap) each get the answer to their own body', async () => {
  // The server answers each request with the id from its body, after a random delay so answers interleave.
  const srv = await scripted((r, sock) => {
    const id = /"id":(\d+)/.exec(r)?.[1] ?? 'none';
    setTimeout(() => sock.write(OK(`{"echo":${id}}`)), Math.floor(Math.random() * 5));
  });
  const c = client({ connections_per_replica: 256 });
  const runs = Array.from({ length: 200 }, (_, i) => {
    const r = recorder();
    c.dispatch(srv.url, req(`{"id":${i}}`), r.handler);
    return r.done;
  });
  const results = await Promise.all(runs);
  results.forEach((res, i) => assert.deepEqual([res.status, res.body, res.error], [200, `{"echo":${i}}`, null]));
  assert.equal(srv.requests.length, 200, 'each request written exactly once');
});

test('an abort in the turn of the dispatch, on a warm keep-alive connection, writes nothing to the replica', async () => {
  const srv = await scripted((_r, sock) => sock.write(OK('{}')));
  const c = client({ connections_per_replica: 1 });
  const warm = recorder();
  c.dispatch(srv.url, req('{"warm":1}'), warm.handler);
  assert.equal((await warm.done).error, null);
  assert.equal(c.connections(srv.url), 1, 'the connection is idle in the pool, connected');

  const a = recorder();
  const call = c.dispatch(srv.url, req('{"a":1}'), a.handler);
  call.abort(); // same turn: the write is still queued
  assert.deepEqual([(await a.done).error, a.result.settled], ['aborted', 1]);
  await sleep(50);
  assert.ok(!srv.requests.some((x) => x.includes('"a":1')), 'the aborted request never reached the replica');
  assert.equal(srv.requests.length, 1);

  // The next request still works (on a new connection: the aborted one was closed with its exchange).
  const b = recorder();
  c.dispatch(srv.url, req('{"b":1}'), b.handler);
  assert.deepEqual([(await b.done).error, b.result.body], [null, '{}']);
});

test('a request made outside any I/O callback (from a timer) is written without waiting for other I/O', async () => {
  // Nothing else is happening: the flush must not wait for the poll phase to see some unrelated event.
  const srv = await scripted((_r, sock) => sock.write(OK('{"ok":true}')));
  const c = client();
  const warm = recorder();
  c.dispatch(srv.url, req(), warm.handler);
  await warm.done;
  const r = recorder();
  const t0 = await new Promise<number>((resolve) => setTimeout(() => {
    c.dispatch(srv.url, req(), r.handler);
    resolve(performance.now());
  }, 5));
  const res = await r.done;
  assert.equal(res.body, '{"ok":true}');
  // waiting for other I/O would mean waiting for the keep-alive timers (seconds) or forever
  assert.ok(res.settledAt - t0 < 2000, `answered ${(res.settledAt - t0).toFixed(1)} ms after the dispatch`);
});

test('bytes a replica sends while a request is still queued for the write fail it as reset, never become its answer', async () => {
  // 60 ms after answering the first request the replica writes an unsolicited response on the idle keep-alive
  // connection. The second request is dispatched 10 ms after the first answer, and this thread then stays busy
  // for 250 ms, so the stray bytes are waiting in the socket when the poll phase comes, before the check phase
  // that would have written request 2.
  const { url } = await processReplica(`(req, sock, n) => {
    sock.write('HTTP/1.1 200 OK\\r\\ncontent-length: 7\\r\\n\\r\\n{"n":1}');
    if (n === 1) setTimeout(() => sock.write('HTTP/1.1 200 OK\\r\\ncontent-length: 9\\r\\n\\r\\n{"stray"}'), 60);
  }`);
  const c = client({ connections_per_replica: 1 });
  const first = recorder();
  c.dispatch(url, req('{"n":1}'), first.handler);
  assert.deepEqual([(await first.done).body, first.result.error], ['{"n":1}', null]);
  const second = recorder();
  await new Promise<void>((resolve) => setTimeout(() => {
    c.dispatch(url, req('{"n":2}'), second.handler);
    spin(250); // the replica speaks out of turn meanwhile
    resolve();
  }, 10));
  const res = await second.done;
  assert.deepEqual([res.error, res.errorCode, res.body], ['reset', 'UPSTREAM_UNSOLICITED', ''], 'the stray response is not request 2\'s answer');
  assert.equal(res.settled, 1);
});

test('a queued write waits at most about 0.5 ms for later dispatches of the same turn, not for the whole turn', async () => {
  // The replica answers with the time each request arrived on the machine's monotonic clock
  // (process.hrtime.bigint() is CLOCK_MONOTONIC, comparable across processes).
  const { url } = await processReplica(`(req, sock) => {
    const at = String(process.hrtime.bigint());
    sock.write('HTTP/1.1 200 OK\\r\\ncontent-length: ' + at.length + '\\r\\n\\r\\n' + at);
  }`);
  const c = client({ connections_per_replica: 4 });
  // Two warm connections, so neither request below waits for a connect.
  const warm = [recorder(), recorder()];
  warm.forEach((w, i) => c.dispatch(url, req(`{"warm":${i}}`), w.handler));
  await Promise.all(warm.map((w) => w.done));

  // Ordering on the monotonic clock, not durations: A is not written before B's send (so it did wait within
  // the turn) and reaches the replica before the turn ends (so it did not wait for the end). The turn's rest
  // is long so that the replica process gets a core to note A's arrival on a busy machine.
  const a = recorder();
  const b = recorder();
  let sendB = 0n;
  let turnEnd = 0n;
  await new Promise<void>((resolve) => setTimeout(() => {
    c.dispatch(url, req('{"a":1}'), a.handler);
    spin(30); // A's write is now 30 ms old
    sendB = process.hrtime.bigint();
    c.dispatch(url, req('{"b":1}'), b.handler); // this send() finds it old: both go out now
    spin(600); // the rest of the turn
    turnEnd = process.hrtime.bigint();
    resolve();
  }, 5));
  const [ra, rb] = await Promise.all([a.done, b.done]);
  assert.deepEqual([ra.error, rb.error], [null, null]);
  const arrivedA = BigInt(ra.body);
  assert.ok(arrivedA >= sendB, 'A was written with B\'s send, not at its own dispatch');
  assert.ok(arrivedA < turnEnd, `A reached the replica ${Number(turnEnd - arrivedA) / 1e6} ms before the turn's end`);
});
