// Reads one JSON string field out of raw response bytes without parsing the document around it: the reply
// text of a chat delta (`"content":"…"`), a completions chunk (`"text":"…"`) or a non-streaming body, which
// the router wants for a finished reply's block hashes. Thread: main. Per call: one native search for the
// key, one for the closing quote (more only when the text has escaped quotes), a byte scan of the value for
// a backslash, one UTF-8 decode; JSON.parse of the literal only when it holds an escape.

/**
 * The string value of `key` (its bytes up to and including the opening quote, e.g. `"content":"`) in
 * buf[from, end), taking only a key that starts an object member (after `{` or `,`, so `"content":"` never
 * matches inside `"reasoning_content":"`); null when absent, not a string, or malformed.
 */
export function jsonStringField(buf: Buffer, key: Buffer, from: number, end: number): string | null {
  let k = buf.indexOf(key, from);
  while (k !== -1 && k < end) {
    const before = k > 0 ? buf[k - 1] : -1;
    if (before === 0x7b /* { */ || before === 0x2c /* , */) return jsonStringAt(buf, k + key.length, end);
    k = buf.indexOf(key, k + key.length);
  }
  return null;
}

/** The string whose body starts at `start` (just after its opening quote), up to its unescaped closing quote. */
function jsonStringAt(buf: Buffer, start: number, end: number): string | null {
  let q = buf.indexOf(0x22, start);
  while (q !== -1 && q < end) {
    let slashes = 0;
    while (buf[q - slashes - 1] === 0x5c /* \ */ && q - slashes - 1 >= start) slashes++;
    if (slashes % 2 === 0) break;
    q = buf.indexOf(0x22, q + 1);
  }
  if (q === -1 || q >= end) return null;
  for (let i = start; i < q; i++) {
    if (buf[i] !== 0x5c) continue;
    // An escape (\n, \", \uXXXX): let JSON.parse decode the literal.
    try {
      return JSON.parse(buf.toString('utf8', start - 1, q + 1)) as string;
    } catch {
      return null;
    }
  }
  return buf.toString('utf8', start, q);
}
