// One keep-alive HTTP/1.1 connection to a replica, carrying one exchange at a time (no pipelining: vLLM
// streams, and a second request queued behind a 4,000-token stream would wait for all of it).
// Reads land in one module-wide buffer through net's `onread` option: no Buffer is allocated per read and no
// stream 'data' event runs; the parser hands out views of that buffer, valid only during the callback (the SSE
// relay writes them to uWS, which copies, or copies a partial event itself). Writes are one string per request,
// and a loop turn's writes go out together at its end.
// Thread: main. Hot path: onRead per socket read, send per attempt (written in one burst per loop turn).
import { connect, type Socket } from 'node:net';
import { H1ResponseParser, type H1ResponseSink } from './h1-response-parser.ts';
import type { UpstreamFailureKind } from './upstream-errors.ts';

/** One request/response on a connection, as the connection sees it. */
export interface H1Exchange {
  onHead(status: number): void;
  onBody(chunk: Buffer): void;
  onComplete(): void;
  onFailure(kind: UpstreamFailureKind, err: Error): void;
  /** Optional: wraps the parsing of one socket read (UpstreamHandler.batch); calls `parse` once, synchronously. */
  batch?(parse: () => void): void;
  /** Ms allowed from the request's write to its response head, and between two reads after that. */
  readonly headersTimeoutMs: number;
  readonly bodyTimeoutMs: number;
}

/** What the pool learns from a connection. */
export interface H1ConnectionOwner {
  /** The exchange ended and the connection can carry another one. */
  released(c: H1Connection): void;
  /** The connection is gone (closed, failed or destroyed); it must not be used again. */
  dropped(c: H1Connection): void;
}

/**
 * 64 KiB, shared by every connection of this thread: a read is consumed synchronously before the next one
 * lands, so one buffer serves them all. Larger reads simply take two callbacks.
 */
const READ_BUFFER = Buffer.allocUnsafe(64 * 1024);

/**
 * Request writes wait for the end of the event-loop turn that made them and then go out back to back
 * (flushWrites, from setImmediate: the check phase right after the poll phase that ran the requests' handlers).
 * Why: a write to a replica that is asleep in epoll wakes it, and that wake-up is paid by the writer's syscall
 * (an inter-processor interrupt, a VM exit under a hypervisor). Written one by one between the gateway's
 * per-request work, a turn's requests reach a replica one at a time and wake it once each; written together,
 * they find it awake after the first. Measured on a loaded 2-core VM (`npm run bench -- ab`): gateway CPU per
 * JSON request 0.81x, per 16-token stream 0.84x, and the mocks' own CPU per request drops too.
 * Cost: a request made early in a busy turn waits for the rest of that turn's work. The queue goes out at once
 * when it holds MAX_QUEUED_WRITES or when a send() finds its oldest write MAX_QUEUED_MS old (a turn that
 * tokenizes long prompts inline between dispatches); work after the turn's last send (relaying other streams)
 * still delays it, by that work's length. An idle gateway runs one request per turn, so the wait is the hop from
 * poll to check phase (a few µs). A request aborted before its write (same turn, no early flush in between) is
 * never written.
 */
const WRITE_QUEUE: H1Connection[] = [];
const MAX_QUEUED_WRITES = 64;
/** A queued write older than this goes out with the next send() instead of waiting for the end of the turn. */
const MAX_QUEUED_MS = 0.5;
let flushScheduled = false;
/** performance.now() when the oldest write in WRITE_QUEUE was queued. */
let oldestQueuedAt = 0;

function flushWrites(): void {
  flushScheduled = false;
  // A write can fail synchronously only through the socket's 'error' event (emitted on next tick), so the
  // loop never re-enters send(); the index loop still tolerates pushes made by a flushWrite.
  for (let i = 0; i < WRITE_QUEUE.length; i++) WRITE_QUEUE[i]!.flushWrite();
  WRITE_QUEUE.length = 0;
}

export function upstreamError(code: string, message: string): Error {
  return Object.assign(new Error(message), { code });
}

export class H1Connection implements H1ResponseSink {
  readonly socket: Socket;
  exchange: H1Exchange | null = null;
  /**
   * performance.now() of the last socket read, to the sweeper's resolution (or of resume()): the body timeout
   * runs from it. A read only sets `readSinceSweep`; the sweeper stamps the time of its next pass (≤ 100 ms
   * later), so a body timeout fires at most one sweep late, never early.
   * Why not a clock read per read: performance.now() is a call into C++ (~70 ns, more with the crossing), and
   * a streamed token is one read; the flag is a plain store.
   */
  lastActivity = performance.now();
  readSinceSweep = false;
  /**
   * performance.now() from which the headers timeout runs: the request's write, or the connection coming up
   * when the request was written while it was still connecting (that phase is the connect timeout's).
   */
  sentAt = 0;
  headReceived = false;
  /** Idle in the pool since (performance.now()), for the keep-alive limit. */
  idleSince = 0;
  connected = false;
  /** The consumer paused the read (backpressure): no timeout runs while the gateway itself holds the socket. */
  paused = false;
  private gone = false;
  private pendingWrite: string | null = null;
  /**
   * The exchange completed with keep-alive inside the read being parsed. The connection is handed back only
   * after the whole read is parsed: bytes after the response must fail it, never become the next request's.
   */
  private releasePending = false;
  private connectTimer: NodeJS.Timeout | null;
  private readonly parser: H1ResponseParser;
  private readonly owner: H1ConnectionOwner;
  /** The read being parsed (bytes in READ_BUFFER) and what the parser said; fields so parseRead needs no closure per read. */
  private readLength = 0;
  private readError: string | null = null;
  private readonly parseRead = (): void => {
    this.readError = this.parser.feed(READ_BUFFER, 0, this.readLength);
  };

  constructor(host: string, port: number, connectTimeoutMs: number, owner: H1ConnectionOwner) {
    this.owner = owner;
    this.parser = new H1ResponseParser(this);
    this.socket = connect({
      host,
      port,
      noDelay: true,
      onread: { buffer: READ_BUFFER, callback: (n: number) => this.onRead(n) },
    });
    this.socket.once('connect', () => {
      this.connected = true;
      this.clearConnectTimer();
      if (this.exchange !== null) this.sentAt = performance.now();
    });
    this.connectTimer = setTimeout(() => {
      this.connectTimer = null;
      this.fail('connect', upstreamError('UPSTREAM_CONNECT_TIMEOUT', `connect timeout after ${connectTimeoutMs} ms`));
    }, connectTimeoutMs);
    this.socket.on('error', (err: Error) => this.fail(this.connected ? 'reset' : 'connect', err));
    this.socket.on('end', () => this.onEof());
    this.socket.on('close', () => this.onClose());
  }

  get alive(): boolean {
    return !this.gone;
  }

  /**
   * Queues one request (head and body in one string, so one write syscall) for the exchange; it is written at
   * the end of this event-loop turn (see WRITE_QUEUE), or never if the connection is destroyed first.
   */
  send(request: string, exchange: H1Exchange): void {
    this.exchange = exchange;
    this.headReceived = false;
    this.parser.reset();
    const now = performance.now();
    this.sentAt = this.lastActivity = now;
    this.pendingWrite = request;
    if (WRITE_QUEUE.push(this) === 1) oldestQueuedAt = now;
    if (WRITE_QUEUE.length >= MAX_QUEUED_WRITES || now - oldestQueuedAt >= MAX_QUEUED_MS) {
      flushWrites();
    } else if (!flushScheduled) {
      flushScheduled = true;
      setImmediate(flushWrites);
    }
  }

  /** Writes the request queued by send(), unless the connection went away meanwhile. */
  flushWrite(): void {
    const request = this.pendingWrite;
    this.pendingWrite = null;
    if (request !== null && !this.gone) this.socket.write(request, 'utf8');
  }

  pause(): void {
    if (this.paused || this.gone) return;
    this.paused = true;
    this.socket.pause();
  }

  resume(): void {
    if (!this.paused || this.gone) return;
    this.paused = false;
    // The pause was ours, not the replica's silence: the body timeout starts again from here.
    this.lastActivity = performance.now();
    this.socket.resume();
  }

  /** Closes the connection; the exchange on it (if any) is not told (the caller settles it). */
  destroy(): void {
    this.exchange = null;
    this.close();
  }

  /** Fails the exchange in flight (if any) with kind and closes the connection. */
  fail(kind: UpstreamFailureKind, err: Error): void {
    if (this.gone) return;
    const ex = this.exchange;
    this.exchange = null;
    this.close();
    if (ex !== null) ex.onFailure(kind, err);
  }

  // H1ResponseSink: called from inside parser.feed().
  onHead(status: number): void {
    this.headReceived = true;
    this.exchange?.onHead(status);
  }

  onBody(chunk: Buffer): void {
    this.exchange?.onBody(chunk);
  }

  onComplete(keepAlive: boolean): void {
    const ex = this.exchange;
    this.exchange = null;
    if (keepAlive && !this.gone) this.releasePending = true; // handed back by onRead once the read is parsed
    else this.close();
    if (ex !== null) ex.onComplete();
  }

  private onRead(n: number): boolean {
    if (this.gone) return false;
    this.readSinceSweep = true;
    if (this.exchange === null) {
      // Bytes nobody asked for (a replica answering twice, or speaking before the request): unusable.
      this.close();
      return false;
    }
    if (this.pendingWrite !== null) {
      // The request is still queued for this turn's write burst, so these bytes answer nothing we sent (a
      // replica speaking out of turn on an idle keep-alive connection). Read as a response, they would be
      // this request's answer and shift every later one: fail before any byte, which the pipeline retries.
      this.fail('reset', upstreamError('UPSTREAM_UNSOLICITED', 'the replica sent bytes before the request was written'));
      return false;
    }
    this.readLength = n;
    this.readError = null;
    const ex = this.exchange;
    if (ex.batch !== undefined) ex.batch(this.parseRead);
    else this.parseRead();
    const err = this.readError;
    if (this.releasePending) {
      this.releasePending = false;
      // The exchange already completed; bytes after it (err) mean the connection is out of step: drop it.
      if (err !== null || this.gone) {
        this.close();
        return false;
      }
      // A response completed inside a read the relay paused on is not a reason to keep the socket paused.
      this.resume();
      this.owner.released(this);
      return !this.paused && !this.gone;
    }
    if (err !== null && !this.gone) this.fail(this.headReceived ? 'reset' : 'other', upstreamError('UPSTREAM_BAD_RESPONSE', err));
    return !this.paused && !this.gone;
  }

  private onEof(): void {
    if (this.gone) return;
    const err = this.exchange !== null ? this.parser.eof() : null;
    if (err !== null) this.fail('reset', upstreamError('UPSTREAM_CLOSED', err));
    else this.close();
  }

  private onClose(): void {
    if (this.gone) return;
    // A close without an 'error' or 'end' first (destroyed under us): the exchange, if any, was cut.
    this.fail(this.connected ? 'reset' : 'connect', upstreamError('UPSTREAM_CLOSED', 'connection closed'));
  }

  private close(): void {
    if (this.gone) return;
    this.gone = true;
    this.clearConnectTimer();
    this.socket.destroy();
    this.owner.dropped(this);
  }

  private clearConnectTimer(): void {
    if (this.connectTimer !== null) {
      clearTimeout(this.connectTimer);
      this.connectTimer = null;
    }
  }
}
