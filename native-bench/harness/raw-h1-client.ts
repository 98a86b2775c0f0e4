// A purpose-built HTTP/1.1 client, just enough for the relay floor's `--client raw` variant: keep-alive
// net.Sockets per upstream, the request written in one write, a response parser for Content-Length and chunked
// bodies (no trailers, no pipelining, no 1xx, no redirects). It exists to measure how much of the floor's CPU
// undici costs (issue 3: "pick the client by measurement, undici 7 or a purpose-built one"); it is not a
// client to ship as is. Thread: main of the minimal-relay process. Hot path of that bench target.
import { connect } from 'node:net';
import type { Socket } from 'node:net';

export interface RawResponseHandler {
  onStart(status: number, contentType: string): void;
  /** A view into the socket's read buffer: copy it if it must outlive the call. */
  onData(chunk: Buffer): void;
  onEnd(): void;
  onError(err: Error): void;
}

const CRLF = Buffer.from('\r\n');
const HEAD_END = Buffer.from('\r\n\r\n');
const S_HEAD = 0;
const S_LENGTH = 1;
const S_CHUNK_SIZE = 2;
const S_CHUNK_DATA = 3;
const S_CHUNK_CRLF = 4;
const S_LAST_CRLF = 5;

class RawConnection {
  readonly socket: Socket;
  handler: RawResponseHandler | null = null;
  private state = S_HEAD;
  private pending: Buffer | null = null;
  private remaining = 0;
  private readonly release: (c: RawConnection) => void;
  private readonly drop: (c: RawConnection) => void;

  constructor(host: string, port: number, release: (c: RawConnection) => void, drop: (c: RawConnection) => void) {
    this.release = release;
    this.drop = drop;
    this.socket = connect({ host, port, noDelay: true });
    this.socket.on('data', (b: Buffer) => this.onBytes(b));
    this.socket.on('error', (err) => this.fail(err));
    this.socket.on('close', () => this.fail(new Error('upstream closed the connection')));
  }

  send(head: string, body: Buffer, handler: RawResponseHandler): void {
    this.handler = handler;
    this.state = S_HEAD;
    this.socket.cork();
    this.socket.write(head, 'latin1');
    this.socket.write(body);
    this.socket.uncork();
  }

  private fail(err: Error): void {
    this.drop(this);
    const h = this.handler;
    this.handler = null;
    if (h !== null) h.onError(err);
  }

  private finish(): void {
    const h = this.handler;
    this.handler = null;
    this.pending = null;
    this.release(this);
    if (h !== null) h.onEnd();
  }

  private onBytes(input: Buffer): void {
    let buf = input;
    if (this.pending !== null) {
      buf = Buffer.concat([this.pending, input]);
      this.pending = null;
    }
    let at = 0;
    while (at < buf.length && this.handler !== null) {
      const h = this.handler;
      switch (this.state) {
        case S_HEAD: {
          const end = buf.indexOf(HEAD_END, at);
          if (end === -1) { this.pending = Buffer.from(buf.subarray(at)); return; }
          const head = buf.toString('latin1', at, end);
          at = end + 4;
          const status = Number(head.slice(9, 12));
          const lower = head.toLowerCase();
          const ct = /\r\ncontent-type:[ \t]*([^\r]*)/.exec(lower);
          const cl = /\r\ncontent-length:[ \t]*(\d+)/.exec(lower);
          h.onStart(status, ct?.[1] ?? 'application/json');
          if (cl) {
            this.remaining = Number(cl[1]);
            this.state = S_LENGTH;
            if (this.remaining === 0) { this.finish(); return; }
          } else {
            this.state = S_CHUNK_SIZE;
          }
          break;
        }
        case S_LENGTH: {
          const n = Math.min(this.remaining, buf.length - at);
          h.onData(buf.subarray(at, at + n));
          at += n;
          this.remaining -= n;
          if (this.remaining === 0) { this.finish(); return; }
          break;
        }
        case S_CHUNK_SIZE: {
          const eol = buf.indexOf(CRLF, at);
          if (eol === -1) { this.pending = Buffer.from(buf.subarray(at)); return; }
          this.remaining = parseInt(buf.toString('latin1', at, eol), 16);
          at = eol + 2;
          this.state = this.remaining === 0 ? S_LAST_CRLF : S_CHUNK_DATA;
          break;
        }
        case S_CHUNK_DATA: {
          const n = Math.min(this.remaining, buf.length - at);
          h.onData(buf.subarray(at, at + n));
          at += n;
          this.remaining -= n;
          if (this.remaining === 0) this.state = S_CHUNK_CRLF;
          break;
        }
        case S_CHUNK_CRLF:
        case S_LAST_CRLF: {
          if (buf.length - at < 2) { this.pending = Buffer.from(buf.subarray(at)); return; }
          at += 2;
          if (this.state === S_LAST_CRLF) { this.finish(); return; }
          this.state = S_CHUNK_SIZE;
          break;
        }
        default:
          return;
      }
    }
  }
}

/** Keep-alive connections to one upstream; opens a new one whenever none is idle. */
export class RawH1Pool {
  private readonly host: string;
  private readonly port: number;
  private readonly hostHeader: string;
  private readonly idle: RawConnection[] = [];

  constructor(origin: string) {
    const u = new URL(origin);
    this.host = u.hostname;
    this.port = Number(u.port || 80);
    this.hostHeader = u.host;
  }

  request(path: string, body: Buffer, handler: RawResponseHandler): void {
    const conn = this.idle.pop() ?? new RawConnection(this.host, this.port,
      (c) => { this.idle.push(c); },
      (c) => { const i = this.idle.indexOf(c); if (i !== -1) this.idle.splice(i, 1); });
    conn.send(`POST ${path} HTTP/1.1\r\nhost: ${this.hostHeader}\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n`, body, handler);
  }
}
