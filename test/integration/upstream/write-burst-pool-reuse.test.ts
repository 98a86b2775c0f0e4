// The write burst of h1-connection.ts (WRITE_QUEUE, flushed from setImmediate or at once at 64)
// meeting the pool's reuse paths, which h1-write-burst.test.ts does not reach (it opens a connection per request):
// - 100 answers landing in one poll phase release 100 connections, each handed at once (inside its own read
//   callback) to a queued attempt, so the 64-cap flush runs synchronously inside a read callback, in the middle
//   of a batch of reads; every request must still be written exactly once, on its own connection, and get its
//   own answer;
// - UpstreamClient.close() in the turn of the dispatches, with their writes still queued on warm connections:
//   every attempt settles once as aborted and not one request reaches the replica.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { OK, client, closeAll, recorder, req, scripted, sleep } from './scripted-upstream.ts';

after(closeAll);

test('answers released in one poll phase hand their connections to queued attempts past the 64-write cap', async () => {
  const N = 100;
  const waiting: Array<() => void> = [];
  // The first N requests are answered together once all N are in, so their N answers land in one poll phase.
  const srv = await scripted((r, sock, n) => {
    const id = /"id":(\d+)/.exec(r)![1];
    const answer = (): void => void sock.write(OK(`{"echo":${id}}`));
    if (n > N) return answer();
    waiting.push(answer);
    if (waiting.length === N) for (const w of waiting.splice(0)) w();
  });
  const c = client({ connections_per_replica: N });
  const rs = Array.from({ length: 3 * N }, (_, i) => {
    const r = recorder();
    c.dispatch(srv.url, req(`{"id":${i}}`), r.handler);
    return r.done;
  });
  const res = await Promise.all(rs);
  res.forEach((r, i) => assert.deepEqual([r.status, r.body, r.error, r.settled], [200, `{"echo":${i}}`, null, 1], `request ${i}`));
  assert.equal(srv.requests.length, 3 * N, 'each request written exactly once');
  assert.equal(srv.connections, N, 'the connections were reused, none opened past the limit');
});

test('close() in the turn of the dispatches, writes still queued on warm connections: all aborted, nothing written', async () => {
  const srv = await scripted((_r, sock) => sock.write(OK('{}')));
  const c = client({ connections_per_replica: 4 });
  const warm = Array.from({ length: 4 }, () => recorder());
  for (const w of warm) c.dispatch(srv.url, req('{"warm":1}'), w.handler);
  for (const w of await Promise.all(warm.map((w) => w.done))) assert.equal(w.error, null);
  assert.equal(c.connections(srv.url), 4);
  const rs = Array.from({ length: 6 }, () => recorder()); // 4 on the warm connections, 2 queued
  for (const r of rs) c.dispatch(srv.url, req('{"late":1}'), r.handler);
  await c.close();
  for (const r of await Promise.all(rs.map((r) => r.done))) assert.deepEqual([r.error, r.settled], ['aborted', 1]);
  await sleep(50);
  assert.equal(srv.requests.filter((x) => x.includes('"late":1')).length, 0, 'no queued write went out after close()');
  for (const r of rs) assert.equal(r.result.settled, 1);
  assert.equal(c.connections(srv.url), 0);
});
