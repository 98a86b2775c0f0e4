// ClientSink over a uWS HttpResponse: status line strings built once, corked writes, backpressure through
// onWritable. Thread: main. Hot path: write() per relayed chunk costs one uWS call (plus cork when outside a
// uWS callback, which the caller arranges per upstream chunk, not per SSE event).
import type { HttpResponse } from './uws.ts';
import type { ClientSink, HeaderList } from '../relay/client-sink.ts';

const STATUS_LINES = new Map<number, string>([
  [200, '200 OK'], [204, '204 No Content'], [400, '400 Bad Request'], [401, '401 Unauthorized'], [403, '403 Forbidden'],
  [404, '404 Not Found'], [405, '405 Method Not Allowed'], [413, '413 Payload Too Large'],
  [415, '415 Unsupported Media Type'], [422, '422 Unprocessable Entity'], [429, '429 Too Many Requests'],
  [431, '431 Request Header Fields Too Large'],
  [500, '500 Internal Server Error'], [501, '501 Not Implemented'], [502, '502 Bad Gateway'],
  [503, '503 Service Unavailable'], [504, '504 Gateway Timeout'],
]);

const NOOP = (): void => {};

/**
 * What a kept-alive response tells the client about idle sockets. uWS closes a connection idle for
 * HTTP_IDLE_TIMEOUT_S = 10 s, checked on a 4 s tick, so between 8 and 12 s after the last byte and without
 * a word. A client that keeps idle sockets longer (aiohttp: 15 s) may send its next request into a socket the
 * gateway is closing. A client that reads the header (undici, so Node's fetch; browsers) retires an idle
 * socket after 5 s, 3 s before the earliest close. aiohttp and Node's http.Agent do not read it: their users
 * set an idle limit themselves (docs/operations.md). Cost: 24 bytes a response.
 */
export const KEEP_ALIVE_TIMEOUT_S = 5;
const KEEP_ALIVE = `timeout=${KEEP_ALIVE_TIMEOUT_S}`;

/**
 * What one cork may carry. uWS's cork buffer is 16 KiB (one per loop). A write that does not fit makes uWS
 * flush the buffer first, and in this build, when that flush finds the kernel's send buffer full, the new
 * write's bytes are dropped while its chunk-size line has already gone out: the client's HTTP parser then
 * fails on the next chunk (seen as a slow reader's stream cut at random, with the replica still generating).
 * So the sink keeps every cork inside the buffer: a write that would overflow it is held (copied aside) and
 * sent when the cork ends, in corks that fit.
 * Cost: nothing for a read under about 15 KiB; above that, one copy of the overflow and one send per 15 KiB.
 */
const CORK_BUDGET = 16 * 1024 - 1024;
/**
 * Bytes held before write() says stop (one upstream read is at most 64 KiB). Held bytes are the cork's overflow
 * and, while uWS holds a backlog for a slow client (it refused a write), everything written since: the relay
 * keeps reading the replica until this much is waiting, and resumes it only once all of it has gone out.
 * Why hold rather than hand to uWS: each uWS write into a backlog retries sending the backlog first, once per
 * piece of the chunk frame (three pieces and the uncork), and each retry is a send() the full socket refuses;
 * and pausing the replica at the first refusal and resuming at the first writable event made one pause, one
 * resume, one read and those refused sends per writable event (88.5 sends per 27 reads on 300-token streams
 * at c=32, against nginx's 55 per 54). Memory per stream stays bounded: this, plus one read, plus uWS's backlog.
 */
const HIGH_WATER = 64 * 1024;
/** uWS frames each write as `\r\n<hex length>\r\n<data>`: at most 12 bytes besides the data. */
const CHUNK_FRAMING = 12;

function byteLength(chunk: Uint8Array | string): number {
  return typeof chunk === 'string' ? Buffer.byteLength(chunk) : chunk.length;
}

/** A copy: the caller's bytes may be a view of a read buffer that the next socket read overwrites. */
function own(chunk: Uint8Array | string): Uint8Array | string {
  return typeof chunk === 'string' ? chunk : Buffer.from(chunk);
}

export function statusLine(status: number): string {
  return STATUS_LINES.get(status) ?? `${status} Status`;
}

export class UwsSink implements ClientSink {
  aborted = false;
  started = false;
  ended = false;
  private drainCb: (() => void) | null = null;
  private writableHooked = false;
  /** Inside this sink's own cork (its bytes counted against CORK_BUDGET). */
  private corked = false;
  private corkBytes = 0;
  /** Writes not handed to uWS yet, in order: a cork's overflow, or everything written while `blocked`. */
  private held: Array<Uint8Array | string> | null = null;
  private heldBytes = 0;
  /** uWS refused a write: it holds a backlog and will report the socket writable; until then writes are held. */
  private blocked = false;
  /** write() said stop (HIGH_WATER held): the drain is owed once everything held has gone out. */
  private stopped = false;
  /** Everything held went out before anyone asked for the drain: it fires on onDrain. */
  private drainOwed = false;
  /** An end() that came after held writes (or did not fit its cork): sent after them. */
  private deferredEnd: { chunk: Uint8Array | string | undefined; close: boolean } | null = null;
  private readonly res: HttpResponse;
  /** Called once when the client disconnects before the response ended. */
  onClientAbort: (() => void) | null = null;
  /** The body reader's own abort hook (the body promise must settle even if the client leaves mid-upload). */
  onBodyAbort: (() => void) | null = null;
  /**
   * Headers added to whatever response this sink sends, set by the acceptor before any stage runs: the CORS
   * headers for an allowed origin, so that every answer (a stream, an error from any stage, a 413) carries them.
   */
  extra: HeaderList | null = null;
  /**
   * The response says `Keep-Alive: timeout=5`: true when the connection stays open after it (set by the
   * acceptor from the request, request-head.ts keepsAlive); cleared before begin() for a response that closes.
   */
  keepAlive: boolean;

  constructor(res: HttpResponse, keepAlive = false) {
    this.res = res;
    this.keepAlive = keepAlive;
    // onAborted must be registered before any await (uWS rule); after it fires `res` must not be touched.
    res.onAborted(() => {
      this.aborted = true;
      const body = this.onBodyAbort;
      this.onBodyAbort = null;
      if (body !== null) body();
      const cb = this.onClientAbort;
      this.onClientAbort = null;
      if (cb !== null) cb();
    });
  }

  setAbortHandler(cb: () => void): void {
    this.onClientAbort = cb;
  }

  begin(status: number, headers: HeaderList): void {
    if (this.aborted || this.ended || this.started) return;
    this.started = true;
    const res = this.res;
    res.writeStatus(statusLine(status));
    const extra = this.extra;
    const first = headers.length > 0 ? headers : extra;
    if (first === null || first.length === 0) {
      if (this.keepAlive) res.writeHeader('keep-alive', KEEP_ALIVE);
      return;
    }
    // One writeHeader call for the whole block: uWS writes `key: value\r\n` as given, so the later headers ride in
    // the first one's value. Each call converts two JS strings to UTF-8 in C++ (≈ 0.3 µs measured in process;
    // writeStatus ≈ 0.65, getHeader ≈ 0.2); a JSON response carries 7 headers. The values are the gateway's own
    // (validated request ids, numbers, fixed strings, configured origins, a preflight's header names checked
    // against the token grammar), never a client's unchecked bytes, the same as when they were written one call each.
    let block = first[0]![1];
    for (let i = 1; i < first.length; i++) block += `\r\n${first[i]![0]}: ${first[i]![1]}`;
    if (extra !== null && first !== extra) for (let i = 0; i < extra.length; i++) block += `\r\n${extra[i]![0]}: ${extra[i]![1]}`;
    if (this.keepAlive) block += `\r\nkeep-alive: ${KEEP_ALIVE}`;
    if (this.corked) this.corkBytes += block.length + 64;
    res.writeHeader(first[0]![0], block);
  }

  write(chunk: Uint8Array | string): boolean {
    if (this.aborted || this.ended) return true;
    const cost = byteLength(chunk) + CHUNK_FRAMING;
    if (this.held !== null || this.blocked || (this.corked && this.corkBytes + cost > CORK_BUDGET)) {
      (this.held ??= []).push(own(chunk));
      this.heldBytes += cost;
      if (this.heldBytes <= HIGH_WATER) return true;
      this.stopped = true;
      return false;
    }
    if (this.corked) this.corkBytes += cost;
    // A refusal means uWS took the bytes into its backlog: hold what follows until it reports writable.
    if (!this.res.write(chunk)) this.block();
    return true;
  }

  /**
   * `close`: uWS closes the connection once the response is written (for a request whose framing is broken).
   * Such a response must have cleared keepAlive before begin().
   */
  end(chunk?: Uint8Array | string, close = false): void {
    if (this.aborted || this.ended) return;
    this.ended = true; // nothing may touch res after end
    this.onClientAbort = null;
    if (!this.started) this.started = true;
    if (this.held !== null || (this.corked && this.corkBytes + (chunk === undefined ? 0 : byteLength(chunk)) + 64 > CORK_BUDGET)) {
      this.deferredEnd = { chunk: chunk === undefined ? undefined : own(chunk), close };
      // Outside a cork and not waiting for a writable event nothing else would send it.
      if (!this.corked && !this.blocked) this.flushHeld();
      return;
    }
    this.res.end(chunk, close);
  }

  /** Ends a response that has no body and must not say Content-Length (a 204). */
  endWithoutBody(): void {
    if (this.aborted || this.ended) return;
    this.ended = true;
    this.onClientAbort = null;
    if (!this.started) this.started = true;
    this.res.endWithoutBody();
  }

  onDrain(cb: () => void): void {
    if (this.aborted || this.ended) return;
    this.drainCb = cb;
    this.hookWritable();
    if (this.drainOwed) {
      // Everything held went out without uWS refusing any of it: no writable event will come, so the drain is
      // reported on the next turn (never inside the caller's own call).
      this.drainOwed = false;
      setImmediate(() => {
        if (this.drainCb !== cb || this.aborted || this.ended) return;
        this.drainCb = null;
        cb();
      });
    }
  }

  private block(): void {
    this.blocked = true;
    this.hookWritable();
  }

  private hookWritable(): void {
    // uWS keeps a writable handler for the rest of the response, so it is registered once.
    if (this.writableHooked) return;
    this.writableHooked = true;
    this.res.onWritable(() => this.onWritable());
  }

  private onWritable(): boolean {
    // After end() uWS drains its own buffer; an end still held behind other bytes is this sink's to send.
    if (this.aborted || (this.ended && this.deferredEnd === null)) return true;
    this.blocked = false;
    if (this.held !== null || this.deferredEnd !== null) {
      this.flushHeld();
      return true;
    }
    // uWS flushes its own backpressure buffer on a writable event only while no handler is registered; with
    // one it expects the handler to write. Nothing is held here, so without this the bytes uWS already holds
    // would wait for the next write. An empty cork flushes them: uncork writes the buffer out (and keeps
    // polling if it does not fit). Cost: one native call per writable event, and those come only to clients
    // that fell behind.
    this.res.cork(NOOP);
    this.drained();
    return true;
  }

  cork(fn: () => void): void {
    // Nested corks run in place, as uWS runs them: the outer one's budget covers their writes.
    if (this.aborted || this.ended || this.corked) {
      fn();
      return;
    }
    this.corked = true;
    this.corkBytes = 0;
    try {
      this.res.cork(fn);
    } finally {
      this.corked = false;
    }
    // While blocked, what is held waits for the writable event.
    if ((this.held !== null || this.deferredEnd !== null) && !this.blocked) this.flushHeld();
  }

  /**
   * Sends what is held, in corks that fit, until uWS refuses a write (the rest stays held for the next writable
   * event); once everything is out, the deferred end, or the drain owed to a caller told to stop.
   */
  private flushHeld(): void {
    const q = this.held;
    if (q !== null) {
      let i = 0;
      let off = 0;
      let refused = false;
      const fill = (): void => {
        let bytes = 0;
        while (i < q.length && !refused) {
          const c = q[i]!;
          const room = CORK_BUDGET - bytes - CHUNK_FRAMING;
          let ok: boolean;
          if (typeof c === 'string' || c.length - off <= room) {
            if (bytes > 0 && byteLength(c) - off + CHUNK_FRAMING > CORK_BUDGET - bytes) return;
            ok = this.res.write(off === 0 ? c : (c as Uint8Array).subarray(off));
            bytes += byteLength(c) - off + CHUNK_FRAMING;
            i++;
            off = 0;
          } else {
            ok = this.res.write(c.subarray(off, off + room));
            off += room;
            if (ok) return;
          }
          // uWS took the refused bytes into its backlog: they are sent; what follows waits.
          if (!ok) refused = true;
        }
      };
      while (i < q.length && !refused && !this.aborted) this.res.cork(fill);
      if (i < q.length && !this.aborted) {
        const rest = q.slice(i);
        if (off > 0) rest[0] = (rest[0] as Uint8Array).subarray(off);
        this.held = rest;
        let n = 0;
        for (const c of rest) n += byteLength(c) + CHUNK_FRAMING;
        this.heldBytes = n;
      } else {
        this.held = null;
        this.heldBytes = 0;
      }
      if (refused) this.block();
    }
    if (this.aborted || this.held !== null || this.blocked) return;
    const end = this.deferredEnd;
    this.deferredEnd = null;
    if (end !== null) {
      // In a cork of its own (uWS warns about writes outside one, and sends each piece of an uncorked end as
      // its own packet). A stream's end is a few bytes and fits. A JSON body past the buffer overflows it,
      // which loses bytes only if the socket is already full when its response begins (a client that left a
      // previous response on the connection unread).
      this.res.cork(() => this.res.end(end.chunk, end.close));
      return;
    }
    this.drained();
  }

  /** Nothing is held and uWS refused nothing since: a caller told to stop may write again. */
  private drained(): void {
    const f = this.drainCb;
    if (!this.stopped && f === null) return;
    this.stopped = false;
    if (f === null) {
      this.drainOwed = true;
      return;
    }
    this.drainCb = null;
    f();
  }
}
