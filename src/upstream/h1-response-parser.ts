// An incremental HTTP/1.1 response parser, exactly as much as a gateway talking to vLLM (uvicorn) needs:
// status line and headers, Content-Length, chunked (extensions and trailers skipped), body-until-close, 1xx
// interim responses skipped, 204/304 without a body, keep-alive per HTTP/1.0 and 1.1 rules. Body bytes are
// handed on as views of the input (no copy); only a header block or a chunk-size line split across two reads
// is copied and held. Anything malformed is an error, never a guess.
// Thread: main (upstream connections) and poller (src/registry/poll/scrape-connection.ts). Hot path: feed() once
// per socket read; per chunked frame one scan for the size line.

/** What the parser reports. Calls happen synchronously inside feed(). */
export interface H1ResponseSink {
  onHead(status: number): void;
  /** A view into the caller's buffer, valid only during the call. */
  onBody(chunk: Buffer): void;
  /** The message ended; keepAlive says whether the connection may carry another request. */
  onComplete(keepAlive: boolean): void;
}

const CR = 0x0d;
const LF = 0x0a;
/** Largest header block and chunk-size line accepted: uvicorn's are ~150 bytes. */
export const MAX_HEAD_BYTES = 64 * 1024;
const MAX_SIZE_LINE = 1024;

const S_HEAD = 0;
const S_LENGTH = 1;
const S_SIZE = 2;
const S_DATA = 3;
const S_DATA_CRLF = 4;
const S_TRAILERS = 5;
const S_UNTIL_CLOSE = 6;
const S_DONE = 7;
const S_ERROR = 8;

export class H1ResponseParser {
  private state = S_HEAD;
  /** Bytes of an unfinished header block or size line (copied: the input buffer is reused by the socket). */
  private held: Buffer | null = null;
  private remaining = 0;
  /** CR/LF bytes still to skip after a chunk's data. */
  private crlfLeft = 0;
  private keepAlive = true;
  private readonly sink: H1ResponseSink;
  // The bytes a line-oriented step scans (window()): the input, or the held bytes joined with it.
  private wSrc: Buffer = Buffer.alloc(0);
  private wFrom = 0;
  private wTo = 0;
  private wHeld = 0;

  constructor(sink: H1ResponseSink) {
    this.sink = sink;
  }

  /** Starts a new response on the same connection. */
  reset(): void {
    this.state = S_HEAD;
    this.held = null;
    this.remaining = 0;
    this.crlfLeft = 0;
    this.keepAlive = true;
  }

  /** The response ended (the sink saw onComplete). */
  get complete(): boolean {
    return this.state === S_DONE;
  }

  /** Whether any byte of a response arrived (status line or later). */
  get started(): boolean {
    return this.state !== S_HEAD || this.held !== null;
  }

  /**
   * Parses buf[start, end). Returns null, or an error message when the bytes are not a valid response (the
   * connection must then be dropped). Bytes after a complete response are an error too: nothing was asked.
   */
  feed(buf: Buffer, start: number, end: number): string | null {
    let at = start;
    while (at < end) {
      switch (this.state) {
        case S_HEAD: {
          const r = this.head(buf, at, end);
          if (r < 0) return r === -1 ? null : this.fail('malformed response head');
          at = r;
          break;
        }
        case S_LENGTH: {
          const n = Math.min(this.remaining, end - at);
          this.remaining -= n;
          this.sink.onBody(buf.subarray(at, at + n));
          at += n;
          if (this.remaining === 0) this.done();
          break;
        }
        case S_SIZE: {
          const r = this.sizeLine(buf, at, end);
          if (r < 0) return r === -1 ? null : this.fail('malformed chunk size');
          at = r;
          break;
        }
        case S_DATA: {
          const n = Math.min(this.remaining, end - at);
          this.remaining -= n;
          this.sink.onBody(buf.subarray(at, at + n));
          at += n;
          if (this.remaining === 0) {
            this.state = S_DATA_CRLF;
            this.crlfLeft = 2;
          }
          break;
        }
        case S_DATA_CRLF: {
          const expect = this.crlfLeft === 2 ? CR : LF;
          if (buf[at] !== expect) return this.fail('chunk data not followed by CRLF');
          at++;
          if (--this.crlfLeft === 0) this.state = S_SIZE;
          break;
        }
        case S_TRAILERS: {
          const r = this.trailers(buf, at, end);
          if (r < 0) return r === -1 ? null : this.fail('malformed trailers');
          at = r;
          break;
        }
        case S_UNTIL_CLOSE:
          this.sink.onBody(buf.subarray(at, end));
          at = end;
          break;
        case S_DONE:
          return this.fail('bytes after a complete response');
        default:
          return 'parser in error state';
      }
    }
    return null;
  }

  /** The peer closed the connection: completes a body-until-close response, else reports what was cut. */
  eof(): string | null {
    if (this.state === S_UNTIL_CLOSE) {
      this.keepAlive = false;
      this.done();
      return null;
    }
    if (this.state === S_DONE) return null;
    return this.started ? 'connection closed mid-response' : 'connection closed before a response';
  }

  private fail(msg: string): string {
    this.state = S_ERROR;
    this.held = null;
    return msg;
  }

  private done(): void {
    this.state = S_DONE;
    this.sink.onComplete(this.keepAlive);
  }

  /**
   * Sets the scan window for a step that needs whole lines: buf[at, end), or, when bytes of an unfinished
   * line or header block are held from the previous read, those bytes joined with it (rare: a copy).
   */
  private window(buf: Buffer, at: number, end: number): void {
    if (this.held === null) {
      this.wSrc = buf;
      this.wFrom = at;
      this.wTo = end;
      this.wHeld = 0;
      return;
    }
    this.wHeld = this.held.length;
    this.wSrc = Buffer.concat([this.held, buf.subarray(at, end)]);
    this.wFrom = 0;
    this.wTo = this.wSrc.length;
    this.held = null;
  }

  /** Keeps the window for the next read (-1), or -2 when it is already longer than `limit`. */
  private hold(limit: number): number {
    if (this.wTo - this.wFrom > limit) return -2;
    this.held = Buffer.from(this.wSrc.subarray(this.wFrom, this.wTo));
    return -1;
  }

  /** The input index matching window index `i` (held bytes came before the input). */
  private inputIndex(at: number, i: number): number {
    return at + (i - this.wFrom) - this.wHeld;
  }

  /** Returns the index after the header block, -1 when more bytes are needed, -2 on malformed input. */
  private head(buf: Buffer, at: number, end: number): number {
    this.window(buf, at, end);
    const src = this.wSrc;
    const term = src.indexOf('\r\n\r\n', this.wFrom, 'latin1');
    if (term === -1 || term + 4 > this.wTo) return this.hold(MAX_HEAD_BYTES);
    if (!this.parseHead(src.toString('latin1', this.wFrom, term))) return -2;
    return this.inputIndex(at, term + 4);
  }

  private parseHead(text: string): boolean {
    // "HTTP/1.1 200 OK"
    if (text.length < 12 || !text.startsWith('HTTP/1.')) return false;
    const minor = text.charCodeAt(7);
    if (text.charCodeAt(8) !== 0x20 || !isDigit(text.charCodeAt(9)) || !isDigit(text.charCodeAt(10)) || !isDigit(text.charCodeAt(11))) return false;
    const after = text.charCodeAt(12); // a space before the reason phrase, or the line's end
    if (text.length > 12 && after !== 0x20 && after !== 0x0d) return false;
    const status = Number(text.slice(9, 12));
    if (status < 100) return false;
    let keepAlive = minor === 0x31; // HTTP/1.1 keeps the connection unless told otherwise; 1.0 closes it
    let length = -1;
    let chunked = false;
    let i = text.indexOf('\r\n');
    while (i !== -1) {
      const lineStart = i + 2;
      const next = text.indexOf('\r\n', lineStart);
      const lineEnd = next === -1 ? text.length : next;
      const colon = text.indexOf(':', lineStart);
      if (colon === -1 || colon > lineEnd) return false;
      const nameLen = colon - lineStart;
      // Only three headers change how the body is read; compare lengths first, then the lowercased name.
      if (nameLen === 14 || nameLen === 17 || nameLen === 10) {
        const name = text.slice(lineStart, colon).toLowerCase();
        const value = text.slice(colon + 1, lineEnd).trim().toLowerCase();
        if (name === 'content-length') {
          if (!/^\d{1,15}$/.test(value) || (length !== -1 && length !== Number(value))) return false;
          length = Number(value);
        } else if (name === 'transfer-encoding') {
          // Anything but a final "chunked" cannot be framed by a client (RFC 9112 §6.3).
          if (!value.endsWith('chunked')) return false;
          chunked = true;
        } else if (name === 'connection') {
          if (value.includes('close')) keepAlive = false;
          else if (value.includes('keep-alive')) keepAlive = true;
        }
      }
      i = next;
    }
    if (status < 200) {
      // 1xx interim response (100 Continue, 103 Early Hints): the real one follows. 101 would switch protocols.
      if (status === 101) return false;
      this.state = S_HEAD;
      return true;
    }
    this.keepAlive = keepAlive;
    // An abort inside onHead leaves the parser running; the connection ignores what follows (exchange gone).
    this.sink.onHead(status);
    if (status === 204 || status === 304) {
      this.done();
    } else if (chunked) {
      this.state = S_SIZE;
    } else if (length >= 0) {
      this.remaining = length;
      this.state = S_LENGTH;
      if (length === 0) this.done();
    } else {
      this.keepAlive = false;
      this.state = S_UNTIL_CLOSE;
    }
    return true;
  }

  /** Chunk-size line "1a2;ext=1\r\n". Returns the index after it, -1 for more bytes, -2 when malformed. */
  private sizeLine(buf: Buffer, at: number, end: number): number {
    this.window(buf, at, end);
    const src = this.wSrc;
    const from = this.wFrom;
    // A size line is a few bytes ("12b\r\n"): a JS scan costs less than a native indexOf call per chunk.
    const stop = Math.min(this.wTo, from + MAX_SIZE_LINE + 1);
    let lf = from;
    while (lf < stop && src[lf] !== LF) lf++;
    if (lf >= this.wTo) return this.hold(MAX_SIZE_LINE);
    if (lf === stop) return -2;
    if (lf === from || src[lf - 1] !== CR) return -2;
    let size = 0;
    let digits = 0;
    let k = from;
    for (; k < lf - 1; k++) {
      const c = src[k]!;
      const v = c >= 0x30 && c <= 0x39 ? c - 0x30 : c >= 0x61 && c <= 0x66 ? c - 0x57 : c >= 0x41 && c <= 0x46 ? c - 0x37 : -1;
      if (v === -1) break;
      size = size * 16 + v;
      digits++;
    }
    if (digits === 0 || digits > 12) return -2;
    if (k < lf - 1 && src[k] !== 0x3b /* ; */ && src[k] !== 0x20 && src[k] !== 0x09) return -2;
    if (size === 0) {
      this.state = S_TRAILERS;
    } else {
      this.remaining = size;
      this.state = S_DATA;
    }
    return this.inputIndex(at, lf + 1);
  }

  /** After the last chunk: trailer lines up to an empty line (usually none: just CRLF). Returns as sizeLine. */
  private trailers(buf: Buffer, at: number, end: number): number {
    this.window(buf, at, end);
    const src = this.wSrc;
    let lineStart = this.wFrom;
    for (;;) {
      const lf = src.indexOf(LF, lineStart);
      if (lf === -1 || lf >= this.wTo) return this.hold(MAX_HEAD_BYTES);
      if (lf === lineStart || src[lf - 1] !== CR) return -2;
      if (lf === lineStart + 1) {
        this.done();
        return this.inputIndex(at, lf + 1);
      }
      lineStart = lf + 1;
    }
  }
}

function isDigit(c: number): boolean {
  return c >= 0x30 && c <= 0x39;
}
