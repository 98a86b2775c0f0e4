// One HTTP/1.1 request on its own TCP connection, as lean as a client can be: the request's bytes are built
// once before the clock starts, sent in one write, and the response is read from the socket's Buffers
// without stream objects or a parser. Thread: the bench process's main thread. For bursts where the client
// shares the cores with the system under test (overload-demo): node:http costs this process ~1 ms of CPU
// per streamed request (request object, header validation, IncomingMessage, async iteration), which a
// 2-core machine takes from the gateway it measures; this costs a socket, a write and one scan per chunk.
// Understands what the gateway answers: a head, then a body with content-length or chunked (SSE).
import { connect, type Socket } from 'node:net';

export interface OneShotTimes {
  status: number;
  /** Lower-cased header name → value, for the few a bench reads. */
  headers: Map<string, string>;
  /** The body as text (latin1 of the raw bytes for a stream; the JSON of an error is ASCII). */
  body: string;
  /** performance.now() at the call, at the last request byte handed to the kernel, at the response head. */
  calledAt: number;
  writtenAt: number;
  headAt: number;
  /** performance.now() when `firstMatch` was first seen in the body; NaN when never. */
  matchAt: number;
}

/** A request's bytes, built before the burst so that its clock starts at the send. */
export function requestBytes(host: string, path: string, headers: Readonly<Record<string, string>>, body: string): Buffer {
  const b = Buffer.from(body);
  let head = `POST ${path} HTTP/1.1\r\nhost: ${host}\r\ncontent-length: ${b.length}\r\n`;
  for (const [k, v] of Object.entries(headers)) head += `${k}: ${v}\r\n`;
  return Buffer.concat([Buffer.from(`${head}\r\n`), b]);
}

/**
 * Sends `bytes` on `socket` (connected, or connecting to port on 127.0.0.1 when none is given) and resolves
 * when the whole response has come. `firstMatch` is searched for in the body as it arrives (e.g. the first
 * content delta of a stream). The socket is destroyed at the end: one request per connection.
 */
export function oneShot(port: number, bytes: Buffer, firstMatch: RegExp | null, socket?: Socket): Promise<OneShotTimes> {
  return new Promise((resolve, reject) => {
    const calledAt = performance.now();
    const t: OneShotTimes = { status: 0, headers: new Map(), body: '', calledAt, writtenAt: Number.NaN, headAt: Number.NaN, matchAt: Number.NaN };
    const s = socket ?? connect({ host: '127.0.0.1', port, noDelay: true });
    let head = '';
    let rest = '';
    let contentLength = -1;
    let chunked = false;
    let done = false;
    const finish = (err?: Error): void => {
      if (done) return;
      done = true;
      s.destroy();
      if (err !== undefined) reject(err);
      else resolve(t);
    };
    // Whether the body read so far is complete: content-length reached (latin1: one char per byte), or a
    // chunked body's last chunk.
    const complete = (): boolean => (chunked ? rest.endsWith('\r\n0\r\n\r\n') || rest === '0\r\n\r\n' : contentLength >= 0 && rest.length >= contentLength);
    s.on('data', (chunk: Buffer) => {
      const text = chunk.toString('latin1');
      if (Number.isNaN(t.headAt)) {
        head += text;
        const end = head.indexOf('\r\n\r\n');
        if (end < 0) return;
        t.headAt = performance.now();
        const lines = head.slice(0, end).split('\r\n');
        t.status = Number(lines[0]!.split(' ')[1]);
        for (let i = 1; i < lines.length; i++) {
          const c = lines[i]!.indexOf(':');
          if (c > 0) t.headers.set(lines[i]!.slice(0, c).toLowerCase(), lines[i]!.slice(c + 1).trim());
        }
        chunked = (t.headers.get('transfer-encoding') ?? '').includes('chunked');
        contentLength = t.headers.has('content-length') ? Number(t.headers.get('content-length')) : -1;
        rest = head.slice(end + 4);
        head = '';
      } else {
        rest += text;
      }
      if (firstMatch !== null && Number.isNaN(t.matchAt) && firstMatch.test(rest)) t.matchAt = performance.now();
      if (complete()) {
        t.body = rest;
        finish();
      }
    });
    s.once('error', (err) => finish(err));
    s.once('close', () => {
      if (done) return;
      if (Number.isNaN(t.headAt)) {
        finish(new Error('connection closed before a response head'));
        return;
      }
      t.body = rest;
      finish();
    });
    s.write(bytes, () => {
      t.writtenAt = performance.now();
    });
  });
}

/** Opens a connection to 127.0.0.1:port and resolves once it is established (for a pool opened before a burst). */
export function openSocket(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = connect({ host: '127.0.0.1', port, noDelay: true });
    s.once('connect', () => {
      s.off('error', reject);
      resolve(s);
    });
    s.once('error', reject);
  });
}
