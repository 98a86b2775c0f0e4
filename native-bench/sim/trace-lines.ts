// Reads a trace file line by line without holding it as one string: a week of Azure's 2024 trace is over a
// gigabyte, past V8's longest string, where readFileSync(path, 'utf8') throws. Lines may end in \n or \r\n;
// a UTF-8 byte-order mark before the first line is dropped.
// Thread: the run's. Setup only: one 4 MiB buffer reused for the whole file.
import { closeSync, openSync, readSync } from 'node:fs';
import { StringDecoder } from 'node:string_decoder';

const CHUNK_BYTES = 4 * 1024 * 1024;

/**
 * Calls `fn` with each line of the file (without its line end) and its 1-based number, in order. `chunkBytes`
 * is the read size (tests use a few bytes, to split lines and characters across reads).
 */
export function forEachLine(path: string, fn: (line: string, lineNo: number) => void, chunkBytes = CHUNK_BYTES): void {
  const fd = openSync(path, 'r');
  try {
    const buf = Buffer.allocUnsafe(chunkBytes);
    const decoder = new StringDecoder('utf8');
    let carry = '';
    let lineNo = 0;
    const emit = (line: string): void => {
      lineNo++;
      if (lineNo === 1 && line.charCodeAt(0) === 0xfeff) line = line.slice(1);
      fn(line.endsWith('\r') ? line.slice(0, -1) : line, lineNo);
    };
    for (;;) {
      const n = readSync(fd, buf, 0, chunkBytes, null);
      if (n === 0) break;
      const text = carry + decoder.write(buf.subarray(0, n));
      let start = 0;
      for (let nl = text.indexOf('\n'); nl >= 0; nl = text.indexOf('\n', start)) {
        emit(text.slice(start, nl));
        start = nl + 1;
      }
      carry = text.slice(start);
    }
    carry += decoder.end();
    if (carry !== '') emit(carry);
  } finally {
    closeSync(fd);
  }
}
