// UwsSink under client backpressure, over a real uWS listener and a raw TCP client on loopback. uWS holds the
// bytes a congested socket did not take in its own buffer; once a writable handler is registered, uWS leaves
// flushing that buffer to the handler. These pin that bytes the relay already wrote reach a client that starts
// reading again even when nothing more is written (the replica has gone quiet), and that the drain callback
// fires each time the client falls behind.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { createApp, closeListenSocket, listenPort, type us_listen_socket } from '../../../src/server/uws.ts';
import { UwsSink } from '../../../src/server/uws-sink.ts';

const EVENT = Buffer.from(`data: ${'x'.repeat(180)}\n\n`);

let listenSocket: us_listen_socket | null = null;
let client: Socket | null = null;
let sink: UwsSink | null = null;
let drains = 0;
/** Body bytes the sink accepted up to the first write that reported backpressure, that one included. */
let firstEpisode: (bytes: number) => void = () => {};

async function start(): Promise<number> {
  const app = createApp();
  app.get('/stream', (res) => {
    const s = sink = new UwsSink(res);
    s.setAbortHandler(() => {});
    // Outside the uWS callback, as the relay writes: one cork per batch of events.
    setImmediate(() => {
      s.cork(() => s.begin(200, [['content-type', 'text/event-stream']]));
      firstEpisode(writeUntilPushedBack(s));
    });
  });
  return await new Promise((resolve, reject) => {
    app.listen('127.0.0.1', 0, (sock) => {
      if (!sock) return reject(new Error('cannot listen'));
      listenSocket = sock;
      resolve(listenPort(sock));
    });
  });
}

after(() => {
  client?.destroy();
  if (listenSocket !== null) closeListenSocket(listenSocket);
});

/**
 * Writes events until the sink reports backpressure, then asks for the drain callback. One cork per 60
 * events (about 11 KiB), as the relay corks one upstream read: uWS, not the sink's cork overflow, pushes back.
 */
function writeUntilPushedBack(s: UwsSink): number {
  let bytes = 0;
  let full = false;
  for (let batch = 0; batch < 6_000 && !full; batch++) {
    s.cork(() => {
      for (let i = 0; i < 60 && !full; i++) {
        bytes += EVENT.length;
        if (!s.write(EVENT)) full = true;
      }
    });
  }
  if (full) s.onDrain(() => drains++);
  return full ? bytes : -1;
}

async function received(parts: Buffer[], want: number, wantDrains: number): Promise<number> {
  const deadline = Date.now() + 5000;
  let got = 0;
  while (Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
    got = chunkedBodyLength(Buffer.concat(parts));
    if (got === want && drains === wantDrains) break;
  }
  return got;
}

/** Decodes an HTTP/1.1 chunked body so far; returns the data bytes (no framing). */
function chunkedBodyLength(raw: Buffer): number {
  let p = raw.indexOf('\r\n\r\n') + 4;
  let n = 0;
  for (;;) {
    if (raw[p] === 0x0d && raw[p + 1] === 0x0a) p += 2;
    const eol = raw.indexOf('\r\n', p);
    if (eol < 0) return n;
    const size = parseInt(raw.toString('latin1', p, eol), 16);
    if (!(size > 0) || eol + 2 + size > raw.length) return n + Math.max(0, Math.min(size, raw.length - eol - 2));
    n += size;
    p = eol + 2 + size;
  }
}

test('bytes uWS buffered for a stalled client reach it when it reads again, with nothing more written', async () => {
  const port = await start();
  const written = new Promise<number>((resolve) => { firstEpisode = resolve; });
  const c = client = connect(port, '127.0.0.1');
  const parts: Buffer[] = [];
  c.on('data', (chunk: Buffer) => parts.push(chunk));
  c.pause();
  c.write('GET /stream HTTP/1.1\r\nHost: x\r\n\r\n');
  const total = await written;
  assert.ok(total > 0, 'the client never pushed back');

  // The client reads again; the server writes nothing more from here on.
  c.resume();
  let got = await received(parts, total, 1);
  assert.equal(got, total, `the client got ${total - got} fewer body bytes than were written`);
  assert.equal(drains, 1, 'the drain callback fired once for the one backpressure episode');

  // A second episode on the same response (the writable handler is registered once per response).
  c.pause();
  await new Promise((r) => setTimeout(r, 100));
  const more = await new Promise<number>((resolve) => setImmediate(() => resolve(writeUntilPushedBack(sink!))));
  assert.ok(more > 0, 'the client never pushed back the second time');
  await new Promise((r) => setTimeout(r, 200));
  c.resume();
  got = await received(parts, total + more, 2);
  assert.equal(got, total + more, `second episode: ${total + more - got} body bytes missing`);
  assert.equal(drains, 2);
  sink!.cork(() => sink!.end());
});
