// The floor of the gateway's stack: uWS in front (through src/server/uws.ts), an HTTP/1.1 client behind (undici
// Pool.dispatch for `floor`, the gateway's own src/upstream/upstream-client.ts for `floor-raw`),
// round-robin over the upstreams, each upstream chunk written in one cork, the status line and headers sent
// with the first body byte (as the gateway does, so it can still retry before it). No auth, tokenization,
// quota, routing state, metrics or SSE parsing. The relay scenario runs it as the `floor` target: gateway CPU
// minus floor CPU is what the gateway's own logic costs; floor minus nginx is what the Node stack costs.
// Thread: main of its own process (`node --import tsx native-bench/harness/minimal-relay.ts --port N
// --upstream URL ... [--client undici|raw] [--server uws|node]`). Hot path of this bench target only; prints `listening <port>` once ready.
import { createServer } from 'node:http';
import type { ServerResponse } from 'node:http';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import type { Dispatcher } from 'undici';
import { createApp, listenPort } from '../../src/server/uws.ts';
import type { HttpResponse } from '../../src/server/uws.ts';
import { UpstreamClient } from '../../src/upstream/upstream-client.ts';

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '0' },
    upstream: { type: 'string', multiple: true, default: [] },
    /** undici (Pool.dispatch, the stock client, for comparison) or raw (src/upstream/upstream-client.ts, the gateway's own HTTP/1.1 client). */
    client: { type: 'string', default: 'undici' },
    /** uws (src/server/uws.ts, what the gateway uses) or node (node:http), for the front side. */
    server: { type: 'string', default: 'uws' },
  },
});
const pools = values.upstream.map((u) => new Pool(u, { connections: 128, pipelining: 1, keepAliveTimeout: 60_000 }));
const rawClient = new UpstreamClient({ connect_timeout_ms: 2000, connections_per_replica: 128 });
if (pools.length === 0 || (values.client !== 'undici' && values.client !== 'raw') || (values.server !== 'uws' && values.server !== 'node')) {
  console.error('usage: minimal-relay.ts --port N --upstream URL [--upstream URL ...] [--client undici|raw] [--server uws|node]');
  process.exit(2);
}
const useRaw = values.client === 'raw';
let next = 0;

const STATUS: Record<number, string> = { 200: '200 OK', 400: '400 Bad Request', 404: '404 Not Found', 500: '500 Internal Server Error', 502: '502 Bad Gateway' };

/** The client side of one relayed response: status and headers go out with the first body bytes. */
interface Front {
  aborted: boolean;
  data(status: number, contentType: string, chunk: Buffer): void;
  finish(status: number, contentType: string, tail?: string): void;
  /** Runs one upstream read's parsing inside one cork (the gateway's UpstreamHandler.batch). */
  batch(parse: () => void): void;
}

/** uWS: every write from an upstream callback inside one cork, and one cork per upstream read, as src/server does. */
class UwsFront implements Front {
  aborted = false;
  private started = false;
  private readonly res: HttpResponse;
  constructor(res: HttpResponse) {
    this.res = res;
  }
  private head(status: number, contentType: string): void {
    this.started = true;
    this.res.writeStatus(STATUS[status] ?? `${status} Status`);
    this.res.writeHeader('content-type', contentType);
  }
  data(status: number, contentType: string, chunk: Buffer): void {
    this.res.cork(() => {
      if (!this.started) this.head(status, contentType);
      this.res.write(chunk);
    });
  }
  finish(status: number, contentType: string, tail?: string): void {
    this.res.cork(() => {
      if (!this.started) this.head(status, contentType);
      this.res.end(tail);
    });
  }
  batch(parse: () => void): void {
    if (this.aborted) parse();
    else this.res.cork(parse);
  }
}

/** node:http, for comparison: res.write per upstream chunk (Node corks the chunked-encoding framing itself). */
class NodeFront implements Front {
  aborted = false;
  private readonly res: ServerResponse;
  constructor(res: ServerResponse) {
    this.res = res;
  }
  data(status: number, contentType: string, chunk: Buffer): void {
    if (!this.res.headersSent) this.res.writeHead(status, { 'content-type': contentType });
    this.res.write(chunk);
  }
  finish(status: number, contentType: string, tail?: string): void {
    if (!this.res.headersSent) this.res.writeHead(status, { 'content-type': contentType });
    this.res.end(tail);
  }
  batch(parse: () => void): void {
    parse();
  }
}

function relay(front: Front, path: string, body: Buffer): void {
  const index = next++ % pools.length;
  let status = 0;
  let contentType = 'application/json';
  let sentAny = false;
  const handler: Dispatcher.DispatchHandler = {
    // Present so undici 7 treats this as a new-API handler (it validates the legacy onConnect otherwise).
    onRequestStart() {},
    onResponseStart(_c, statusCode, headers) {
      status = statusCode;
      const ct = headers['content-type'];
      if (typeof ct === 'string') contentType = ct;
    },
    onResponseData(_c, chunk) {
      if (front.aborted) return;
      sentAny = true;
      front.data(status, contentType, chunk);
    },
    onResponseEnd() {
      if (front.aborted) return;
      front.finish(status, contentType);
    },
    onResponseError(_c, err) {
      if (front.aborted) return;
      if (sentAny) front.finish(status, contentType);
      else front.finish(502, 'application/json', JSON.stringify({ error: { message: err.message, type: 'server_error', param: null, code: 'upstream_unavailable' } }));
    },
  };
  if (useRaw) {
    rawClient.dispatch(values.upstream[index] as string, { path, body: body.toString('utf8'), headers: { 'content-type': 'application/json' }, headersTimeoutMs: 60_000, bodyTimeoutMs: 60_000 }, {
      onStart: (statusCode) => { status = statusCode; },
      onData: (chunk) => handler.onResponseData?.(NO_CONTROLLER, chunk),
      onEnd: () => handler.onResponseEnd?.(NO_CONTROLLER, {}),
      onError: (_kind, err) => handler.onResponseError?.(NO_CONTROLLER, err),
      batch: (parse) => front.batch(parse),
    });
    return;
  }
  (pools[index] as Pool).dispatch({ method: 'POST', path, headers: { 'content-type': 'application/json' }, body }, handler);
}

/** The raw client reuses the undici handler's callbacks, which ignore their controller argument. */
const NO_CONTROLLER = null as unknown as Dispatcher.DispatchController;

if (values.server === 'node') {
  const server = createServer((req, res) => {
    if (req.method !== 'POST') {
      res.writeHead(404).end();
      return;
    }
    const front = new NodeFront(res);
    res.once('close', () => { if (!res.writableFinished) front.aborted = true; });
    const parts: Buffer[] = [];
    req.on('data', (b: Buffer) => parts.push(b));
    req.on('end', () => relay(front, req.url ?? '/', parts.length === 1 ? parts[0] as Buffer : Buffer.concat(parts)));
  });
  server.keepAliveTimeout = 60_000;
  server.listen(Number(values.port), '127.0.0.1', () => {
    const addr = server.address();
    console.log(`listening ${typeof addr === 'object' && addr !== null ? addr.port : values.port}`);
  });
} else {
  const app = createApp();
  app.get('/*', (res) => { res.writeStatus('404 Not Found').end(); });
  app.post('/*', (res, req) => {
    const path = req.getUrl();
    const front = new UwsFront(res);
    res.onAborted(() => { front.aborted = true; });
    const parts: Buffer[] = [];
    res.onData((ab, isLast) => {
      // uWS reuses `ab` after the callback returns, so each part is copied.
      parts.push(Buffer.from(new Uint8Array(ab.slice(0))));
      if (isLast) relay(front, path, parts.length === 1 ? parts[0] as Buffer : Buffer.concat(parts));
    });
  });
  app.listen('127.0.0.1', Number(values.port), (socket) => {
    if (!socket) {
      console.error(`minimal-relay: cannot listen on ${values.port}`);
      process.exit(1);
    }
    console.log(`listening ${listenPort(socket)}`);
  });
}
process.once('SIGTERM', () => process.exit(0));
