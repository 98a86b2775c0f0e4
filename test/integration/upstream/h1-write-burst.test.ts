// The upstream client writes a loop turn's requests together at the end of that turn (h1-connection.ts,
// WRITE_QUEUE). What a user of the client must still see: every request reaches its own replica connection
// and gets its own answer, however many are made in one turn (past the queue's cap too); a request aborted
// in the turn that made it is never written, even on a warm keep-alive connection; and nothing waits for a
// later turn than the one after it.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { OK, client, closeAll, recorder, req, scripted, sleep } from './scripted-upstream.ts';

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
  assert.ok(res.settledAt - t0 < 500, `answered ${(res.settledAt - t0).toFixed(1)} ms after the dispatch`);
});
