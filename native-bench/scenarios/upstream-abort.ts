// upstream-abort scenario: how soon does the upstream client's abort reach the replica, and how late past their
// setting do its timeouts fire? The real UpstreamClient (src/upstream/upstream-client.ts) against scripted raw
// HTTP servers on loopback (test/integration/upstream/scripted-upstream.ts), per trial:
// - in flight: from abort() on a streaming exchange to the server's 'close' event on that socket;
// - queued: from abort() on an attempt waiting for the replica's one connection to its onError;
// - headers timeout (--timeout-ms) on a silent server, and connect timeout against a listener whose accept queue
//   is full: the time past the setting at which each fired (headers: the sweeper checks every 100 ms, so
//   0-100 ms late by design; connect: a timer of its own).
// Reported, not asserted: test/integration/upstream/h1-client*.test.ts assert that each happens, and never early.
// Thread: bench main thread (client and servers); the blackhole listener is a stopped child process.
import { parseArgs } from 'node:util';
import type { Socket } from 'node:net';
import type { BenchScenario } from '../types.ts';
import { OK, blackhole, client, closeAll, recorder, req, scripted, until } from '../../test/integration/upstream/scripted-upstream.ts';

const pct = (sorted: number[], p: number): number => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;
const LONG = { headersTimeoutMs: 60_000, bodyTimeoutMs: 60_000 };

const upstreamAbort: BenchScenario = async (args) => {
  const { values } = parseArgs({ args, options: { trials: { type: 'string', default: '30' }, 'timeout-ms': { type: 'string', default: '300' } } });
  const trials = Number(values.trials);
  const timeoutMs = Number(values['timeout-ms']);
  const inFlight: number[] = [];
  const queued: number[] = [];
  const headersLate: number[] = [];
  const connectLate: number[] = [];
  try {
    let closedAt = 0;
    const streaming = await scripted((_r, sock) => {
      sock.once('close', () => { closedAt = performance.now(); });
      sock.write('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n');
    });
    const held: Socket[] = [];
    const busy = await scripted((_r, sock) => held.push(sock));
    const silent = await scripted(() => undefined);
    const c = client({ connections_per_replica: 1 });
    for (let i = 0; i < trials; i++) {
      closedAt = 0;
      let started = false;
      const call = c.dispatch(streaming.url, req('{}', LONG), recorder(() => { started = true; }).handler);
      await until(() => started, 10_000);
      const t0 = performance.now();
      call.abort();
      await until(() => closedAt > 0, 10_000);
      inFlight.push(closedAt - t0);

      const holder = recorder();
      c.dispatch(busy.url, req('{}', LONG), holder.handler);
      await until(() => held.length === i + 1, 10_000);
      const q = recorder();
      const qcall = c.dispatch(busy.url, req('{}', LONG), q.handler);
      const t1 = performance.now();
      qcall.abort();
      queued.push((await q.done).settledAt - t1);
      held[i]!.write(OK('{}'));
      await holder.done;

      const h = recorder();
      const t2 = performance.now();
      c.dispatch(silent.url, req('{}', { headersTimeoutMs: timeoutMs }), h.handler);
      headersLate.push((await h.done).settledAt - t2 - timeoutMs);
    }
    // A fresh client per connect: a timed-out connect leaves nothing to reuse anyway.
    const bh = await blackhole();
    for (let i = 0; i < Math.min(trials, 10); i++) {
      const r = recorder();
      const t3 = performance.now();
      client({ connect_timeout_ms: timeoutMs }).dispatch(bh.url, req('{}', LONG), r.handler);
      connectLate.push((await r.done).settledAt - t3 - timeoutMs);
    }
  } finally {
    await closeAll();
  }
  const rows: Array<Array<string | number>> = [];
  for (const [name, xs] of [
    ['abort in flight -> replica sees the close', inFlight],
    ['abort while queued -> settled', queued],
    [`headers timeout (${timeoutMs} ms): fired this late`, headersLate],
    [`connect timeout (${timeoutMs} ms): fired this late`, connectLate],
  ] as const) {
    const s = [...xs].sort((a, b) => a - b);
    rows.push([name, s.length, pct(s, 0).toFixed(2), pct(s, 0.5).toFixed(2), pct(s, 0.95).toFixed(2), pct(s, 1).toFixed(2)]);
  }
  return {
    title: 'Upstream client: abort to replica, and timeouts past their setting (ms)',
    columns: ['case', 'samples', 'min', 'p50', 'p95', 'max'],
    rows,
    notes: ['one process: client, scripted servers and timers share the event loop; reported, not asserted'],
    extra: { inFlight, queued, headersLate, connectLate },
  };
};

export default upstreamAbort;
