// Reads a request body from uWS with a size limit. uWS hands each chunk as an ArrayBuffer valid only during
// the callback, so chunks are copied (into one preallocated Buffer when content-length is known). Over the
// limit the request is answered 413 at once and the promise resolves null; so does a client abort.
// Thread: main. Hot path: one copy per chunk.
import type { HttpResponse } from './uws.ts';
import type { UwsSink } from './uws-sink.ts';
import type { HeaderList } from '../relay/client-sink.ts';
import { errorBody } from '../errors/openai-error-body.ts';

const TOO_LARGE = errorBody({ code: 'request_too_large' });

function tooLarge(sink: UwsSink, requestId: string): void {
  const headers: HeaderList = [['content-type', 'application/json'], ['x-request-id', requestId]];
  sink.cork(() => {
    sink.begin(413, headers);
    sink.end(TOO_LARGE);
  });
}

export function readBody(res: HttpResponse, sink: UwsSink, contentLength: number, maxBytes: number, requestId: string): Promise<Buffer | null> {
  return new Promise((resolve) => {
    if (contentLength > maxBytes) {
      tooLarge(sink, requestId);
      resolve(null);
      return;
    }
    let done = false;
    sink.onBodyAbort = () => {
      if (!done) {
        done = true;
        resolve(null);
      }
    };
    const known = contentLength > 0;
    const buf: Buffer | null = known ? Buffer.allocUnsafe(contentLength) : null;
    let parts: Buffer[] | null = known ? null : [];
    let size = 0;
    res.onData((chunk, isLast) => {
      if (done) return;
      const n = chunk.byteLength;
      if (size + n > maxBytes || (known && size + n > contentLength)) {
        done = true;
        tooLarge(sink, requestId);
        resolve(null);
        return;
      }
      if (buf !== null) Buffer.from(chunk).copy(buf, size);
      else parts!.push(Buffer.from(chunk.slice(0)));
      size += n;
      if (isLast) {
        done = true;
        sink.onBodyAbort = null;
        const whole: Buffer = buf !== null ? buf : parts!.length === 1 ? parts![0]! : Buffer.concat(parts!, size);
        parts = null;
        resolve(size === whole.length ? whole : whole.subarray(0, size));
      }
    });
  });
}
