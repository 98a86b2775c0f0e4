// Reads JSON string fields out of raw response bytes without parsing the document around them: the reply text
// of chat deltas (`"content":"…"`), completions chunks (`"text":"…"`) or a non-streaming body, which the
// router wants for a finished reply's block hashes. Thread: main.
// A stream's pieces are kept as the raw bytes between their quotes (ReplyTextBuilder) and decoded once at
// the end: concatenated JSON string bodies are one JSON string body (an escape never spans two), so one
// UTF-8 decode (and one JSON.parse when any piece holds a backslash) replaces a native decode per token.

/** Where a string value's body lies: buf[start, end), between its quotes. */
export interface JsonStringSpan {
  start: number;
  end: number;
}

/**
 * Finds the string value of `key` (its bytes up to and including the opening quote, e.g. `"content":"`) in
 * buf[from, end), taking only a key that starts an object member (after `{` or `,`, so `"content":"` never
 * matches inside `"reasoning_content":"`). Cost: one native search for the key, one per quote up to the
 * closing one. False when absent, not a string, or unterminated.
 */
export function findJsonString(buf: Buffer, key: Buffer, from: number, end: number, out: JsonStringSpan): boolean {
  let k = buf.indexOf(key, from);
  while (k !== -1 && k < end) {
    const before = k > 0 ? buf[k - 1] : -1;
    if (before === 0x7b /* { */ || before === 0x2c /* , */) {
      const start = k + key.length;
      let q = buf.indexOf(0x22, start);
      while (q !== -1 && q < end && escapedAt(buf, q, start)) q = buf.indexOf(0x22, q + 1);
      if (q === -1 || q >= end) return false;
      out.start = start;
      out.end = q;
      return true;
    }
    k = buf.indexOf(key, k + key.length);
  }
  return false;
}

/** Whether the quote at `q` is escaped: preceded (not before `floor`) by an odd number of backslashes. */
export function escapedAt(buf: Buffer, q: number, floor: number): boolean {
  let slashes = 0;
  while (q - slashes - 1 >= floor && buf[q - slashes - 1] === 0x5c /* \ */) slashes++;
  return slashes % 2 === 1;
}

/** The decoded string value of `key` in buf[from, end), or null (see findJsonString). */
export function jsonStringField(buf: Buffer, key: Buffer, from: number, end: number): string | null {
  const span: JsonStringSpan = { start: 0, end: 0 };
  if (!findJsonString(buf, key, from, end, span)) return null;
  return decodeJsonStringBody(buf, span.start, span.end);
}

function decodeJsonStringBody(buf: Uint8Array, start: number, end: number): string | null {
  for (let i = start; i < end; i++) {
    if (buf[i] !== 0x5c) continue;
    // An escape (\n, \", \uXXXX): let JSON.parse decode the literal.
    try {
      return JSON.parse(`"${Buffer.from(buf.buffer, buf.byteOffset + start, end - start).toString('utf8')}"`) as string;
    } catch {
      return null;
    }
  }
  return Buffer.from(buf.buffer, buf.byteOffset + start, end - start).toString('utf8');
}

/**
 * The raw bytes of a stream's text pieces, decoded once by text(). Per piece: a byte copy in JS (a token's few
 * bytes; no native call), the buffer doubling from 256 bytes as the reply grows.
 */
export class ReplyTextBuilder {
  private bytes: Uint8Array | null = null;
  private length = 0;

  append(buf: Uint8Array, start: number, end: number): void {
    const n = end - start;
    let bytes = this.bytes;
    if (bytes === null || this.length + n > bytes.length) {
      const grown = new Uint8Array(Math.max(256, 2 * (this.length + n)));
      if (bytes !== null) grown.set(bytes.subarray(0, this.length));
      bytes = this.bytes = grown;
    }
    let at = this.length;
    for (let i = start; i < end; i++) bytes[at++] = buf[i]!;
    this.length = at;
  }

  /** The text so far, or null when the pieces do not decode (a replica's malformed escape). */
  text(): string | null {
    return this.bytes === null ? '' : decodeJsonStringBody(this.bytes, 0, this.length);
  }
}
