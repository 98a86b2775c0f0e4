// The part every stream relay shares, whatever its wire format: split each upstream read into SSE events
// ("\n\n"-terminated), let the format classify each one (onEvent), forward the runs of events it keeps as the
// upstream Buffer itself or views of it (no copy), keep a partial event for the next read, and end the
// client's stream at the format's clean end or with one error event. sse-relay.ts (chat and completions
// chunks) and responses-relay.ts (Responses API events) supply onEvent and the error event's shape.
// Thread: main. Hot path: per event one native search for its end plus what onEvent costs.
import type { ClientSink } from './client-sink.ts';
import type { Rejection } from '../errors/rejection.ts';

const EVENT_END = Buffer.from('\n\n');

export abstract class EventRelay {
  sawDone = false;
  /** Set when the upstream sent an error event (the stream then ends with the gateway's error event). */
  upstreamError: Rejection | null = null;
  protected readonly sink: ClientSink;
  private pending: Buffer | null = null;
  private backpressured = false;
  /** The client response was ended (at the clean end, or by close/fail). */
  private ended = false;
  /** Largest single event accepted: a replica that never ends its event would otherwise grow it forever. */
  private readonly maxEventBytes: number;

  constructor(sink: ClientSink, maxEventBytes: number) {
    this.sink = sink;
    this.maxEventBytes = maxEventBytes;
  }

  /** Classifies one event (bytes s..e, "\n\n" included); false when it must not be forwarded as is. */
  protected abstract onEvent(buf: Buffer, s: number, e: number): boolean;

  /** The gateway's error event in this wire format. */
  protected abstract errorEvent(r: Rejection): string;

  /**
   * Relays one upstream chunk. Returns true when the client is backpressured (the caller pauses the upstream
   * until sink.onDrain fires). The caller wraps the call in sink.cork().
   */
  push(chunk: Buffer): boolean {
    // After the clean end or an upstream error event nothing more is relayed (the stream is over for the client).
    if (this.sawDone || this.upstreamError !== null) return false;
    let buf = chunk;
    if (this.pending !== null) {
      buf = Buffer.concat([this.pending, chunk]);
      this.pending = null;
    }
    this.backpressured = false;
    const len = buf.length;
    let eventStart = 0;
    let fwdStart = 0;
    let i = buf.indexOf(EVENT_END, 0);
    while (i !== -1) {
      const eventEnd = i + 2;
      if (!this.onEvent(buf, eventStart, eventEnd)) {
        // Drop this event: flush what precedes it.
        if (eventStart > fwdStart) this.forward(buf.subarray(fwdStart, eventStart));
        fwdStart = eventEnd;
      }
      eventStart = eventEnd;
      if (this.upstreamError !== null || this.sawDone) break;
      i = eventStart < len ? buf.indexOf(EVENT_END, eventStart) : -1;
    }
    // The common case, a chunk of whole events all forwarded, goes out as the chunk itself (no view).
    if (fwdStart === 0 && eventStart === len) this.forward(buf);
    else if (eventStart > fwdStart) this.forward(buf.subarray(fwdStart, eventStart));
    if (eventStart < len && this.upstreamError === null && !this.sawDone) {
      if (len - eventStart > this.maxEventBytes) {
        this.upstreamError = { code: 'upstream_error', message: `The replica sent an SSE event larger than ${this.maxEventBytes / 1024 / 1024} MiB.` };
        return this.backpressured;
      }
      // Keep the partial event. Copy: the upstream Buffer may be reused by the socket layer.
      this.pending = Buffer.from(buf.subarray(eventStart));
    }
    if (this.sawDone && this.upstreamError === null && !this.ended) {
      // The clean end is relayed: the stream is complete for the client. End it now rather than at the
      // upstream body's end, so a client that leaves right after it is not counted as a cancel.
      this.ended = true;
      this.sink.end();
      // uWS owns what is left to flush; the upstream must not stay paused waiting for a drain that will
      // never be reported on an ended response.
      return false;
    }
    return this.backpressured;
  }

  /** Whether the stream reached its clean end or an upstream error event. */
  get finished(): boolean {
    return this.sawDone || this.upstreamError !== null;
  }

  /** Ends the client stream after a failure: one error event, never a clean end. */
  fail(r: Rejection): void {
    if (this.ended) return;
    this.ended = true;
    this.sink.end(this.errorEvent(r));
  }

  /** Ends the client stream after the upstream body ended. */
  close(): void {
    if (this.ended) return;
    this.ended = true;
    this.sink.end(this.upstreamError !== null ? this.errorEvent(this.upstreamError) : undefined);
  }

  private forward(bytes: Buffer): void {
    if (!this.sink.write(bytes)) this.backpressured = true;
  }
}

export function startsWith(buf: Buffer, at: number, needle: Buffer): boolean {
  if (at + needle.length > buf.length) return false;
  for (let k = 0; k < needle.length; k++) if (buf[at + k] !== needle[k]) return false;
  return true;
}
