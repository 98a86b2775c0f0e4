// ClientSink over a uWS HttpResponse: status line strings built once, corked writes, backpressure through
// onWritable. Thread: main. Hot path: write() per relayed chunk costs one uWS call (plus cork when outside a
// uWS callback, which the caller arranges per upstream chunk, not per SSE event).
import type { HttpResponse } from './uws.ts';
import type { ClientSink, HeaderList } from '../relay/client-sink.ts';

const STATUS_LINES = new Map<number, string>([
  [200, '200 OK'], [204, '204 No Content'], [400, '400 Bad Request'], [401, '401 Unauthorized'], [403, '403 Forbidden'],
  [404, '404 Not Found'], [405, '405 Method Not Allowed'], [413, '413 Payload Too Large'],
  [415, '415 Unsupported Media Type'], [422, '422 Unprocessable Entity'], [429, '429 Too Many Requests'],
  [500, '500 Internal Server Error'], [501, '501 Not Implemented'], [502, '502 Bad Gateway'],
  [503, '503 Service Unavailable'], [504, '504 Gateway Timeout'],
]);

const NOOP = (): void => {};

export function statusLine(status: number): string {
  return STATUS_LINES.get(status) ?? `${status} Status`;
}

export class UwsSink implements ClientSink {
  aborted = false;
  started = false;
  ended = false;
  private drainCb: (() => void) | null = null;
  private writableHooked = false;
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

  constructor(res: HttpResponse) {
    this.res = res;
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
    if (first === null || first.length === 0) return;
    // One writeHeader call for the whole block: uWS writes `key: value\r\n` as given, so the later headers ride in
    // the first one's value. Each call converts two JS strings to UTF-8 in C++ (≈ 0.3 µs measured in process;
    // writeStatus ≈ 0.65, getHeader ≈ 0.2); a JSON response carries 7 headers. The values are the gateway's own
    // (validated request ids, numbers, fixed strings, configured origins, a preflight's header names checked
    // against the token grammar), never a client's unchecked bytes, the same as when they were written one call each.
    let block = first[0]![1];
    for (let i = 1; i < first.length; i++) block += `\r\n${first[i]![0]}: ${first[i]![1]}`;
    if (extra !== null && first !== extra) for (let i = 0; i < extra.length; i++) block += `\r\n${extra[i]![0]}: ${extra[i]![1]}`;
    res.writeHeader(first[0]![0], block);
  }

  write(chunk: Uint8Array | string): boolean {
    if (this.aborted || this.ended) return true;
    return this.res.write(chunk);
  }

  end(chunk?: Uint8Array | string): void {
    if (this.aborted || this.ended) return;
    this.ended = true; // nothing may touch res after end
    this.onClientAbort = null;
    if (!this.started) this.started = true;
    this.res.end(chunk);
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
    // uWS keeps a writable handler for the rest of the response, so it is registered once.
    if (!this.writableHooked) {
      this.writableHooked = true;
      this.res.onWritable(() => this.onWritable());
    }
  }

  private onWritable(): boolean {
    // uWS flushes its own backpressure buffer on a writable event only while no handler is registered; with
    // one it expects the handler to write. Ours writes nothing (the replica's next bytes come later, or never
    // if they were all relayed), so without this the bytes uWS already holds would wait for the next upstream
    // read. An empty cork flushes them: uncork writes the buffer out (and keeps polling if it does not fit).
    // Cost: one native call per writable event, and those come only to clients that fell behind.
    if (this.aborted || this.ended) return true;
    this.res.cork(NOOP);
    const f = this.drainCb;
    this.drainCb = null;
    if (f !== null && !this.aborted && !this.ended) f();
    return true;
  }

  cork(fn: () => void): void {
    if (this.aborted || this.ended) {
      fn();
      return;
    }
    this.res.cork(fn);
  }
}
