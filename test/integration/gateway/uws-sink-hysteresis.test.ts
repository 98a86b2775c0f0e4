// UwsSink's hysteresis under a slow client, over a real uWS listener and a raw TCP client on loopback. When uWS
// refuses a write (its backlog is the client's), the sink holds what follows instead of handing it to uWS (each
// uWS write into a backlog retries the send first), tells the writer to stop only once 64 KiB are held, and
// reports the drain only once everything held has gone out. These pin both halves: no uWS write between a
// refusal and the stop, and a writer that stops and resumes on every drain over many stalls gets every byte
// to the client, in order, with one drain per stop.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { createApp, closeListenSocket, listenPort, type HttpResponse, type us_listen_socket } from '../../../src/server/uws.ts';
import { UwsSink } from '../../../src/server/uws-sink.ts';

const sockets: Socket[] = [];
const listeners: us_listen_socket[] = [];
after(() => {
  for (const c of sockets) c.destroy();
  for (const l of listeners) closeListenSocket(l);
});

function event(i: number): Buffer {
  return Buffer.from(`data: ${String(i).padStart(8, '0')}${'z'.repeat(170)}\n\n`);
}

/** What the sink asked of uWS: every res.write with its answer. */
interface WriteLog { calls: number; refusedAtCall: number }

/** The real response with its write() counted (the sink's only way to hand bytes to uWS besides end()). */
function counted(res: HttpResponse, log: WriteLog): HttpResponse {
  return new Proxy(res, {
    get(target, key) {
      if (key === 'write') {
        return (chunk: Uint8Array | string): boolean => {
          log.calls++;
          const ok = target.write(chunk);
          if (!ok && log.refusedAtCall < 0) log.refusedAtCall = log.calls;
          return ok;
        };
      }
      const v = (target as unknown as Record<PropertyKey, unknown>)[key];
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}

async function listen(route: (res: HttpResponse) => void): Promise<number> {
  const app = createApp();
  app.get('/s', route);
  return await new Promise((resolve, reject) => {
    app.listen('127.0.0.1', 0, (sock) => {
      if (!sock) return reject(new Error('cannot listen'));
      listeners.push(sock);
      resolve(listenPort(sock));
    });
  });
}

/** Decodes uWS's chunked framing and returns the SSE events in the body so far. */
function events(raw: Buffer): string[] {
  const text = raw.toString('latin1');
  const body = ('\r\n' + text.slice(text.indexOf('\r\n\r\n') + 4)).replace(/\r\n[0-9a-f]+\r\n/g, '');
  return body.split('\n\n').filter((e) => e.startsWith('data: '));
}

test('after uWS refuses a write, the sink hands it nothing more and says stop only past 64 KiB held', async () => {
  const log: WriteLog = { calls: 0, refusedAtCall: -1 };
  let acceptedAfterRefusal = 0;
  let callsAtStop = -1;
  let total = 0;
  let stopped: () => void = () => {};
  const stoppedP = new Promise<void>((resolve) => { stopped = resolve; });
  const port = await listen((res) => {
    const s = new UwsSink(counted(res, log));
    s.setAbortHandler(() => {});
    setImmediate(() => {
      s.cork(() => s.begin(200, [['content-type', 'text/event-stream']]));
      // One cork per 60 events (about 11 KiB), as the relay corks one upstream read.
      for (let batch = 0, i = 0; batch < 20_000 && callsAtStop < 0; batch++) {
        s.cork(() => {
          for (let k = 0; k < 60; k++, i++) {
            const e = event(i);
            total++;
            const ok = s.write(e);
            if (ok && log.refusedAtCall >= 0) acceptedAfterRefusal += e.length;
            if (!ok) {
              callsAtStop = log.calls;
              break;
            }
          }
        });
      }
      s.onDrain(() => s.cork(() => s.end()));
      stopped();
    });
  });
  const c = connect(port, '127.0.0.1');
  sockets.push(c);
  c.pause();
  c.write('GET /s HTTP/1.1\r\nHost: x\r\n\r\n');
  await stoppedP;
  assert.ok(log.refusedAtCall > 0, 'uWS never refused a write');
  assert.equal(callsAtStop, log.refusedAtCall, 'no uWS write between its refusal and the stop: the rest was held');
  assert.ok(acceptedAfterRefusal >= 60 * 1024, `write() said stop after ${acceptedAfterRefusal} bytes past the refusal (expected about 64 KiB)`);

  // The client reads: everything accepted arrives, in order, then the end.
  const parts: Buffer[] = [];
  c.on('data', (b: Buffer) => parts.push(b));
  c.resume();
  const deadline = Date.now() + 10_000;
  while (!Buffer.concat(parts).includes('\r\n0\r\n\r\n') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  const got = events(Buffer.concat(parts));
  assert.equal(got.length, total, 'every accepted event arrived');
  got.forEach((e, i) => { if (!e.startsWith(`data: ${String(i).padStart(8, '0')}`)) assert.fail(`event ${i} out of order`); });
});

test('a writer that stops at every stop and resumes at every drain gets the whole stream through many stalls', { timeout: 90_000 }, async () => {
  // About 14 MiB: the client stalls for 150 ms, reads for 5 ms, and again: each stall is long enough for the
  // loopback buffers (a few MiB) and 64 KiB held to fill, so the writer is stopped again and again.
  const TOTAL = 80_000;
  let stops = 0;
  let drains = 0;
  let written = 0;
  let finished = false;
  const port = await listen((res) => {
    const s = new UwsSink(res);
    s.setAbortHandler(() => {});
    // The replica: a batch per turn while the sink takes it; stalled on a stop until the drain.
    const produce = (): void => {
      let stop = false;
      s.cork(() => {
        for (let k = 0; k < 60 && !stop && written < TOTAL; k++) if (!s.write(event(written++))) stop = true;
      });
      if (stop) {
        stops++;
        s.onDrain(() => {
          drains++;
          setImmediate(produce);
        });
      } else if (written >= TOTAL) {
        finished = true;
        s.cork(() => s.end());
      } else {
        setImmediate(produce);
      }
    };
    setImmediate(() => {
      s.cork(() => s.begin(200, [['content-type', 'text/event-stream']]));
      produce();
    });
  });
  const c = connect(port, '127.0.0.1');
  sockets.push(c);
  const parts: Buffer[] = [];
  c.on('data', (b: Buffer) => parts.push(b));
  c.pause();
  c.write('GET /s HTTP/1.1\r\nHost: x\r\n\r\n');
  const ended = (): boolean => parts.length > 0 && Buffer.concat(parts.slice(-2)).includes('\r\n0\r\n\r\n');
  const deadline = Date.now() + 80_000;
  while (!ended() && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 150));
    c.resume();
    await new Promise((r) => setTimeout(r, 5));
    c.pause();
  }
  c.resume();
  assert.ok(finished && ended(), `the stream did not end: ${written} events written, ${stops} stops, ${drains} drains`);
  assert.ok(stops >= 2, `the writer was stopped ${stops} times`);
  assert.equal(drains, stops, 'every stop was followed by its drain');
  const got = events(Buffer.concat(parts));
  assert.equal(got.length, written, 'every written event arrived');
  got.forEach((e, i) => { if (!e.startsWith(`data: ${String(i).padStart(8, '0')}`)) assert.fail(`event ${i} out of order`); });
});
