// One replica's keep-alive HTTP/1.1 connection for the poller's GETs, over node:net, one request at a time.
// Why not node:http: on a 38 KB vLLM page node:http's client costs ~444 us of CPU per GET (ClientRequest,
// IncomingMessage, stream events, header objects); a plain socket with the gateway's own response parser
// costs ~173 us, most of it the kernel's. At 64 replicas x 10 scrapes/s that is ~280 ms/s of a core against
// ~110 ms/s.
// Reads land in one buffer shared by every connection of the thread (net's `onread`: no Buffer per read, no
// 'data' events); a read is parsed synchronously before the next lands. A kept body is copied into this
// connection's own buffer, reused from scrape to scrape, and decoded once, latin1, when the response ends.
// Plain TCP only, as on the data plane (src/upstream/README.md): an https:// replica URL is spoken to in clear.
// Thread: poller. Not on the request path; per scrape: one write, one parse per read, one string decode.
import { connect, type Socket } from 'node:net';
import { H1ResponseParser, type H1ResponseSink } from '../../upstream/h1-response-parser.ts';
import { FAILURE_KIND, type FailureKind } from './protocol.ts';

/** A /metrics page larger than this is not vLLM's (a real one is ~40 KB); the scrape fails. */
export const MAX_BODY_BYTES = 8 * 1024 * 1024;

/** 64 KiB for every connection of this thread: larger reads take two callbacks. */
const READ_BUFFER = Buffer.allocUnsafe(64 * 1024);
/** First size of a connection's body buffer: a real page (~40 KB) fits; it doubles when one does not. */
const FIRST_BODY_BYTES = 64 * 1024;

/** What the connection reports about the request in flight. Called at most once per send(). */
export interface ScrapeSink {
  /** The response ended; `body` is the decoded body when it was kept (a 200 to a keepBody request), else ''. */
  onResponse(status: number, body: string): void;
  /** No usable response; the connection is gone and the next send() opens a new one. */
  onFailure(kind: FailureKind, detail: string): void;
}

export class ScrapeConnection implements H1ResponseSink {
  private readonly host: string;
  private readonly port: number;
  private readonly sink: ScrapeSink;
  private readonly parser = new H1ResponseParser(this);
  private socket: Socket | null = null;
  /** A request is in flight (sent, its response not yet ended or failed). */
  private busy = false;
  private keepBody = false;
  private status = 0;
  private body: Buffer | null = null;
  private bodyLength = 0;
  /** Set inside parser callbacks, acted on once feed() returns (the parser must not be re-entered). */
  private completed = false;
  private completedKeepAlive = false;
  private tooLarge = false;
  /** TCP connections opened (diagnostics and tests: keep-alive reuse shows as 1). */
  connects = 0;

  constructor(host: string, port: number, sink: ScrapeSink) {
    // URL.hostname keeps an IPv6 literal's brackets; connect() wants the bare address.
    this.host = host.startsWith('[') ? host.slice(1, -1) : host;
    this.port = port;
    this.sink = sink;
  }

  /**
   * Writes `request` (a whole GET head, built once per replica) on the open connection, or on a new one when
   * there is none. The sink hears exactly once, unless destroy() comes first.
   */
  send(request: string, keepBody: boolean): void {
    this.busy = true;
    this.keepBody = keepBody;
    this.status = 0;
    this.bodyLength = 0;
    this.completed = false;
    this.tooLarge = false;
    this.parser.reset();
    const socket = this.socket ?? this.open();
    socket.write(request, 'latin1');
  }

  /** Closes the connection; a request in flight is abandoned without a report. */
  destroy(): void {
    this.busy = false;
    const s = this.socket;
    this.socket = null;
    s?.destroy();
  }

  private open(): Socket {
    const socket = connect({
      host: this.host,
      port: this.port,
      noDelay: true,
      onread: {
        buffer: READ_BUFFER,
        // Returning false would pause the socket.
        callback: (n: number): boolean => {
          if (this.socket === socket) this.onRead(n);
          return true;
        },
      },
    });
    this.connects++;
    this.socket = socket;
    socket.on('error', (err: NodeJS.ErrnoException) => {
      if (this.socket === socket) this.drop(FAILURE_KIND.UNREACHABLE, err.code ?? err.message);
    });
    socket.on('end', () => {
      if (this.socket === socket) this.onEof();
    });
    socket.on('close', () => {
      if (this.socket === socket) this.drop(FAILURE_KIND.UNREACHABLE, 'connection closed');
    });
    return socket;
  }

  private onRead(n: number): void {
    if (!this.busy) {
      this.drop(FAILURE_KIND.UNREACHABLE, 'bytes with no request in flight');
      return;
    }
    const err = this.parser.feed(READ_BUFFER, 0, n);
    if (this.tooLarge) {
      this.drop(FAILURE_KIND.NOT_VLLM, `/metrics larger than ${MAX_BODY_BYTES} bytes`);
    } else if (err !== null) {
      // Malformed, or bytes after the response: nothing after it can be trusted on this connection.
      this.drop(FAILURE_KIND.UNREACHABLE, err);
    } else if (this.completed) {
      this.deliver(this.completedKeepAlive);
    }
  }

  private onEof(): void {
    if (!this.busy) {
      // The replica closed an idle keep-alive connection: the next scrape opens a new one.
      this.destroy();
      return;
    }
    const err = this.parser.eof(); // completes a body delimited by the close
    if (err === null && this.completed) this.deliver(false);
    else this.drop(FAILURE_KIND.UNREACHABLE, err ?? 'connection closed');
  }

  /** Ends the request in flight with its response; the connection stays open only when keep-alive allows. */
  private deliver(keepAlive: boolean): void {
    if (!keepAlive) this.destroy();
    this.busy = false;
    const body = this.keepBody && this.status === 200 && this.body !== null ? this.body.toString('latin1', 0, this.bodyLength) : '';
    this.sink.onResponse(this.status, body);
  }

  /** The connection is gone: reports the request in flight, if any, as failed. */
  private drop(kind: FailureKind, detail: string): void {
    const wasBusy = this.busy;
    this.destroy();
    if (wasBusy) this.sink.onFailure(kind, detail);
  }

  onHead(status: number): void {
    this.status = status;
  }

  onBody(chunk: Buffer): void {
    if (!this.keepBody || this.status !== 200 || this.tooLarge) return;
    const need = this.bodyLength + chunk.length;
    if (need > MAX_BODY_BYTES) {
      this.tooLarge = true;
      return;
    }
    let body = this.body;
    if (body === null || need > body.length) {
      let size = body === null ? FIRST_BODY_BYTES : body.length * 2;
      while (size < need) size *= 2;
      const grown = Buffer.allocUnsafe(Math.min(size, MAX_BODY_BYTES));
      if (body !== null) body.copy(grown, 0, 0, this.bodyLength);
      this.body = body = grown;
    }
    chunk.copy(body, this.bodyLength);
    this.bodyLength = need;
  }

  onComplete(keepAlive: boolean): void {
    this.completed = true;
    this.completedKeepAlive = keepAlive;
  }
}
