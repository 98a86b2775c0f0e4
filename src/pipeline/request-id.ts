// The request id every response carries as x-request-id: the client's own when it is well formed (so a client
// can correlate its logs with ours), else 128 random bits. Thread: main. Hot path: one regex test or one
// slice of a pre-drawn random pool per request.
import { randomFillSync } from 'node:crypto';

const REQUEST_ID_OK = /^[A-Za-z0-9._:-]{1,128}$/;

/** Random bytes drawn 4 KiB at a time: one CSPRNG call per 256 ids, one string per id. */
const ID_BYTES = 16;
const idPool = Buffer.alloc(4096);
let idOffset = idPool.length;

/** 32 hex characters (128 random bits), the shape of a UUID without its dashes, for requests that sent no id. */
function randomRequestId(): string {
  if (idOffset + ID_BYTES > idPool.length) {
    randomFillSync(idPool);
    idOffset = 0;
  }
  const id = idPool.toString('hex', idOffset, idOffset + ID_BYTES);
  idOffset += ID_BYTES;
  return id;
}

/** The id for a request whose X-Request-Id header is `header` (undefined or '' when absent). */
export function requestIdFor(header: string | undefined): string {
  return header !== undefined && REQUEST_ID_OK.test(header) ? header : randomRequestId();
}
