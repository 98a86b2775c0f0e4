// The floor of the gateway's stack: uWS in front (through src/server/uws.ts), undici Pool.dispatch behind,
// round-robin over the upstreams, each upstream chunk written in one cork, the status line and headers sent
// with the first body byte (as the gateway does, so it can still retry before it). No auth, tokenization,
// quota, routing state, metrics or SSE parsing. The relay scenario runs it as the `floor` target: gateway CPU
// minus floor CPU is what the gateway's own logic costs; floor minus nginx is what the Node stack costs.
// Thread: main of its own process (`node --import tsx native-bench/harness/minimal-relay.ts --port N
// --upstream URL ... [--client undici|raw]`). Hot path of this bench target only; prints `listening <port>` once ready.
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import type { Dispatcher } from 'undici';
import { createApp, listenPort } from '../../src/server/uws.ts';
import type { HttpResponse } from '../../src/server/uws.ts';
import { RawH1Pool } from './raw-h1-client.ts';

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '0' },
    upstream: { type: 'string', multiple: true, default: [] },
    /** undici (Pool.dispatch, what src/upstream uses) or raw (raw-h1-client.ts, a purpose-built parser). */
    client: { type: 'string', default: 'undici' },
  },
});
const pools = values.upstream.map((u) => new Pool(u, { connections: 128, pipelining: 1, keepAliveTimeout: 60_000 }));
const rawPools = values.upstream.map((u) => new RawH1Pool(u));
if (pools.length === 0 || (values.client !== 'undici' && values.client !== 'raw')) {
  console.error('usage: minimal-relay.ts --port N --upstream URL [--upstream URL ...] [--client undici|raw]');
  process.exit(2);
}
const useRaw = values.client === 'raw';
let next = 0;

const STATUS: Record<number, string> = { 200: '200 OK', 400: '400 Bad Request', 404: '404 Not Found', 500: '500 Internal Server Error', 502: '502 Bad Gateway' };

function relay(res: HttpResponse, path: string, body: Buffer, state: { aborted: boolean }): void {
  const index = next++ % pools.length;
  let status = 0;
  let contentType = 'application/json';
  let started = false;
  const begin = (): void => {
    started = true;
    res.writeStatus(STATUS[status] ?? `${status} Status`);
    res.writeHeader('content-type', contentType);
  };
  const handler: Dispatcher.DispatchHandler = {
    // Present so undici 7 treats this as a new-API handler (it validates the legacy onConnect otherwise).
    onRequestStart() {},
    onResponseStart(_c, statusCode, headers) {
      status = statusCode;
      const ct = headers['content-type'];
      if (typeof ct === 'string') contentType = ct;
    },
    onResponseData(_c, chunk) {
      if (state.aborted) return;
      res.cork(() => {
        if (!started) begin();
        res.write(chunk);
      });
    },
    onResponseEnd() {
      if (state.aborted) return;
      res.cork(() => {
        if (!started) begin();
        res.end();
      });
    },
    onResponseError(_c, err) {
      if (state.aborted) return;
      res.cork(() => {
        if (started) {
          res.end();
          return;
        }
        status = 502;
        begin();
        res.end(JSON.stringify({ error: { message: err.message, type: 'server_error', param: null, code: 'upstream_unavailable' } }));
      });
    },
  };
  if (useRaw) {
    (rawPools[index] as RawH1Pool).request(path, body, {
      onStart: (statusCode, ct) => { status = statusCode; contentType = ct; },
      onData: (chunk) => handler.onResponseData?.(NO_CONTROLLER, chunk),
      onEnd: () => handler.onResponseEnd?.(NO_CONTROLLER, {}),
      onError: (err) => handler.onResponseError?.(NO_CONTROLLER, err),
    });
    return;
  }
  (pools[index] as Pool).dispatch({ method: 'POST', path, headers: { 'content-type': 'application/json' }, body }, handler);
}

/** The raw client reuses the undici handler's callbacks, which ignore their controller argument. */
const NO_CONTROLLER = null as unknown as Dispatcher.DispatchController;

const app = createApp();
app.get('/*', (res) => { res.writeStatus('404 Not Found').end(); });
app.post('/*', (res, req) => {
  const path = req.getUrl();
  const state = { aborted: false };
  res.onAborted(() => { state.aborted = true; });
  const parts: Buffer[] = [];
  res.onData((ab, isLast) => {
    // uWS reuses `ab` after the callback returns, so each part is copied.
    parts.push(Buffer.from(new Uint8Array(ab.slice(0))));
    if (isLast) relay(res, path, parts.length === 1 ? parts[0] as Buffer : Buffer.concat(parts), state);
  });
});
app.listen('127.0.0.1', Number(values.port), (socket) => {
  if (!socket) {
    console.error(`minimal-relay: cannot listen on ${values.port}`);
    process.exit(1);
  }
  console.log(`listening ${listenPort(socket)}`);
});
process.once('SIGTERM', () => process.exit(0));
