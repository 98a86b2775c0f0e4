// UwsSink keeps each uWS cork within uWS's 16 KiB cork buffer (an overflowing cork can drop bytes when the
// client's socket is full). A caller that writes far more than that in one cork still gets every byte out,
// in order, and is told to stop once 64 KiB are set aside; the drain it then asks for fires even though no
// writable event will come (the socket took it all).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { createApp, closeListenSocket, listenPort, type us_listen_socket } from '../../../src/server/uws.ts';
import { UwsSink } from '../../../src/server/uws-sink.ts';

let listenSocket: us_listen_socket | null = null;
let client: Socket | null = null;
after(() => {
  client?.destroy();
  if (listenSocket !== null) closeListenSocket(listenSocket);
});

function event(i: number): Buffer {
  return Buffer.from(`data: ${String(i).padStart(8, '0')}${'y'.repeat(170)}\n\n`);
}

test('one long cork: every accepted byte arrives in order, write() says stop past 64 KiB set aside, and the drain fires', async () => {
  let accepted = 0;
  let stoppedAfter = -1;
  let drained: () => void = () => {};
  const drainedP = new Promise<void>((r) => { drained = r; });
  const app = createApp();
  app.get('/burst', (res) => {
    const s = new UwsSink(res);
    s.setAbortHandler(() => {});
    setImmediate(() => {
      s.cork(() => {
        s.begin(200, [['content-type', 'text/event-stream']]);
        for (let i = 0; i < 5_000; i++) {
          accepted++;
          if (!s.write(event(i))) {
            stoppedAfter = accepted * event(0).length;
            break;
          }
        }
      });
      // Asked after the cork ended, when the set-aside bytes have already gone out.
      s.onDrain(() => {
        drained();
        s.cork(() => s.end());
      });
    });
  });
  const port = await new Promise<number>((resolve, reject) => {
    app.listen('127.0.0.1', 0, (sock) => {
      if (!sock) return reject(new Error('cannot listen'));
      listenSocket = sock;
      resolve(listenPort(sock));
    });
  });
  const c = client = connect(port, '127.0.0.1');
  const parts: Buffer[] = [];
  c.on('data', (b: Buffer) => parts.push(b));
  c.write('GET /burst HTTP/1.1\r\nHost: x\r\n\r\n');
  await drainedP;
  await new Promise<void>((resolve) => {
    const check = (): void => {
      if (Buffer.concat(parts).includes('\r\n0\r\n\r\n')) resolve();
      else setTimeout(check, 20);
    };
    check();
  });
  assert.ok(stoppedAfter > 64 * 1024 && stoppedAfter < 100 * 1024, `write() said stop after ${stoppedAfter} bytes`);
  const raw = Buffer.concat(parts).toString('latin1');
  // uWS's first chunk-size line follows the header block directly; the later ones start with their own CRLF.
  const body = ('\r\n' + raw.slice(raw.indexOf('\r\n\r\n') + 4)).replace(/\r\n[0-9a-f]+\r\n/g, '');
  const events = body.split('\n\n').filter((e) => e.startsWith('data: '));
  assert.equal(events.length, accepted, 'every accepted event arrived');
  events.forEach((e, i) => { if (!e.startsWith(`data: ${String(i).padStart(8, '0')}`)) assert.fail(`event ${i} out of order: ${e.slice(0, 20)}`); });
});
