// The overload-demo's lean client against a raw loopback server: it must read what the gateway answers (a
// 429 with content-length, an SSE stream in chunked encoding) whatever way the bytes are split on the wire,
// time the head and the first content delta, and send exactly the bytes it was given.
import assert from 'node:assert/strict';
import { createServer, type Server, type Socket } from 'node:net';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { oneShot, openSocket, requestBytes } from '../../../native-bench/load/one-shot-http.ts';

type Responder = (sock: Socket, request: string) => Promise<void>;

/** A server that reads one whole request (head + content-length body), then lets `respond` write the answer. */
async function serve(respond: Responder): Promise<{ server: Server; port: number; requests: string[] }> {
  const requests: string[] = [];
  const server = createServer((sock) => {
    let buf = '';
    sock.on('data', (d: Buffer) => {
      buf += d.toString('latin1');
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const len = Number(/content-length: (\d+)/i.exec(buf.slice(0, end))?.[1] ?? 0);
      if (buf.length < end + 4 + len) return;
      requests.push(buf);
      buf = '';
      void respond(sock, requests.at(-1)!);
    });
    sock.on('error', () => undefined);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, port: (server.address() as { port: number }).port, requests };
}

const FIRST = /"content":"[^"]/;
const bytes = (port: number): Buffer => requestBytes(`127.0.0.1:${port}`, '/v1/chat/completions', { authorization: 'Bearer k' }, '{"a":"é"}');

void test('a 429 with content-length: status, retry-after and the JSON body, the head split over two writes', async () => {
  const body = '{"error":{"code":"server_overloaded"}}';
  const { server, port, requests } = await serve(async (sock) => {
    sock.write('HTTP/1.1 429 Too Many Requests\r\nRetry-After: 1\r\ncontent-');
    await sleep(20);
    sock.write(`length: ${body.length}\r\n\r\n${body.slice(0, 10)}`);
    await sleep(20);
    sock.write(body.slice(10));
  });
  try {
    const t = await oneShot(port, bytes(port), FIRST);
    assert.equal(t.status, 429);
    assert.equal(t.headers.get('retry-after'), '1');
    assert.equal((JSON.parse(t.body) as { error: { code: string } }).error.code, 'server_overloaded');
    assert.ok(t.calledAt <= t.writtenAt && t.writtenAt <= t.headAt, 'call, write, head in order');
    assert.ok(t.headAt - t.calledAt >= 15, 'the head is timed when its end came, not its first bytes');
    assert.ok(Number.isNaN(t.matchAt), 'no content delta in an error');
    // exactly the bytes built: content-length counts the UTF-8 body
    assert.match(requests[0]!, /^POST \/v1\/chat\/completions HTTP\/1\.1\r\nhost: 127\.0\.0\.1:\d+\r\ncontent-length: 10\r\nauthorization: Bearer k\r\n\r\n/);
  } finally {
    server.close();
  }
});

void test('a chunked SSE stream: the first content delta is timed after the role-only frame, and the read ends at the last chunk', async () => {
  const frame = (s: string): string => `${s.length.toString(16)}\r\n${s}\r\n`;
  // When the content frame was written, on the client's clock (same process): timed on the role-only frame, the
  // client would read ~40 ms before it. An ordering, not a length of time, so a busy machine cannot fail it.
  let contentWrittenAt = Number.NaN;
  const { server, port } = await serve(async (sock) => {
    sock.write('HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n');
    sock.write(frame('data: {"choices":[{"delta":{"role":"assistant","content":""}}]}\n\n'));
    await sleep(40);
    contentWrittenAt = performance.now();
    sock.write(frame('data: {"choices":[{"delta":{"content":"Hi"}}]}\n\n'));
    await sleep(10);
    sock.write(frame('data: [DONE]\n\n'));
    sock.write('0\r\n\r\n'); // the socket stays open: the client must end on the terminator, not on close
  });
  try {
    const t = await oneShot(port, bytes(port), FIRST);
    assert.equal(t.status, 200);
    assert.ok(t.matchAt >= contentWrittenAt, `timed at ${t.matchAt.toFixed(1)}, before the content frame was written (${contentWrittenAt.toFixed(1)})`);
    assert.ok(t.body.includes('data: [DONE]'));
  } finally {
    server.close();
  }
});

void test('a connection opened before the burst carries the request; a server that closes without answering is an error', async () => {
  const { server, port, requests } = await serve(async (sock, req) => {
    if (req.includes('"a"')) sock.end('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok');
  });
  try {
    const sock = await openSocket(port);
    const t = await oneShot(port, bytes(port), null, sock);
    assert.equal(t.status, 200);
    assert.equal(t.body, 'ok');
    assert.equal(requests.length, 1);
    assert.ok(sock.destroyed, 'one request per connection: the socket is closed after the answer');
  } finally {
    server.close();
  }
  const silent = createServer((s) => s.on('data', () => s.destroy()));
  await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
  const p = (silent.address() as { port: number }).port;
  try {
    await assert.rejects(oneShot(p, bytes(p), null), /closed before a response head/);
  } finally {
    silent.close();
  }
});
