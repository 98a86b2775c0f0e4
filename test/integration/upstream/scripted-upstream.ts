// Scripted HTTP servers on loopback for the upstream client's tests: each answers complete requests with
// whatever raw bytes a test writes, and counts connections (open now, most at once) and requests. Also the
// client factory, a recording UpstreamHandler and small waits; closeAll() cleans up what they made.
import { spawn, type ChildProcess } from 'node:child_process';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { UpstreamClient, type UpstreamHandler, type UpstreamRequest } from '../../../src/upstream/upstream-client.ts';
import type { UpstreamFailureKind } from '../../../src/upstream/upstream-errors.ts';

const servers: Server[] = [];
const clients: UpstreamClient[] = [];
const children: ChildProcess[] = [];
const stray: Socket[] = [];

/** Closes every client, server, child and socket the helpers made; register with node:test's after(). */
export async function closeAll(): Promise<void> {
  for (const c of clients) await c.close();
  for (const s of servers) s.close();
  for (const ch of children) if (ch.exitCode === null) ch.kill('SIGKILL');
  for (const s of stray) s.destroy();
}

export interface Scripted {
  url: string;
  port: number;
  connections: number;
  open: number;
  maxOpen: number;
  requests: string[];
  sockets: Socket[];
  /** Stops listening (its port then refuses connections). */
  close(): Promise<void>;
}

/** A raw TCP server: `respond` gets each complete request (head + body) and its socket. */
export async function scripted(respond: (req: string, sock: Socket, n: number) => void): Promise<Scripted> {
  const s: Scripted = { url: '', port: 0, connections: 0, open: 0, maxOpen: 0, requests: [], sockets: [], close: () => new Promise<void>((r) => server.close(() => r())) };
  const server = createServer((sock) => {
    s.connections++;
    s.open++;
    s.maxOpen = Math.max(s.maxOpen, s.open);
    s.sockets.push(sock);
    sock.on('close', () => { s.open--; });
    let buf = '';
    sock.on('error', () => undefined);
    sock.on('data', (d) => {
      buf += d.toString('latin1');
      for (;;) {
        const end = buf.indexOf('\r\n\r\n');
        if (end === -1) return;
        const len = Number(/content-length: (\d+)/i.exec(buf.slice(0, end))?.[1] ?? 0);
        if (buf.length < end + 4 + len) return;
        const req = buf.slice(0, end + 4 + len);
        buf = buf.slice(end + 4 + len);
        s.requests.push(req);
        respond(req, sock, s.requests.length);
      }
    });
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  s.port = (server.address() as { port: number }).port;
  s.url = `http://127.0.0.1:${s.port}`;
  return s;
}

export function client(over: Partial<{ connect_timeout_ms: number; connections_per_replica: number }> = {}): UpstreamClient {
  const c = new UpstreamClient({ connect_timeout_ms: 1000, connections_per_replica: 8, ...over });
  clients.push(c);
  return c;
}

export interface Result {
  status: number;
  body: string;
  chunks: string[];
  error: UpstreamFailureKind | null;
  errorCode: string | null;
  settledAt: number;
  settled: number;
  /** onStart/onData calls after the attempt settled (must stay 0). */
  lateCalls: number;
}

export function recorder(onChunk?: (chunk: Buffer) => void): { handler: UpstreamHandler; done: Promise<Result>; result: Result } {
  const result: Result = { status: 0, body: '', chunks: [], error: null, errorCode: null, settledAt: 0, settled: 0, lateCalls: 0 };
  let settle!: (r: Result) => void;
  const done = new Promise<Result>((r) => { settle = r; });
  const handler: UpstreamHandler = {
    onStart: (s) => { if (result.settled > 0) result.lateCalls++; result.status = s; },
    onData: (c) => {
      if (result.settled > 0) result.lateCalls++;
      const s = c.toString('latin1');
      result.body += s;
      result.chunks.push(s);
      onChunk?.(c);
    },
    onEnd: () => { result.settled++; result.settledAt = performance.now(); settle(result); },
    onError: (kind, err) => {
      result.settled++;
      if (result.settled === 1) {
        result.error = kind;
        result.errorCode = (err as { code?: string }).code ?? err.name;
      }
      result.settledAt = performance.now();
      settle(result);
    },
  };
  return { handler, done, result };
}

export function req(body = '{"model":"m"}', over: Partial<UpstreamRequest> = {}): UpstreamRequest {
  return { path: '/v1/chat/completions', body, headers: { 'content-type': 'application/json', 'x-request-id': 'rid-1' }, headersTimeoutMs: 5000, bodyTimeoutMs: 5000, ...over };
}

export const OK = (body: string): string => `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Resolves with the promise's value, or 'timeout' after ms. */
export function within<T>(p: Promise<T>, ms: number): Promise<T | 'timeout'> {
  let t: NodeJS.Timeout;
  return Promise.race([p, new Promise<'timeout'>((r) => { t = setTimeout(() => r('timeout'), ms); })]).finally(() => clearTimeout(t));
}

export async function until(cond: () => boolean, ms = 2000): Promise<void> {
  const t0 = performance.now();
  while (!cond() && performance.now() - t0 < ms) await sleep(5);
}

/** A listener whose accept queue is full (backlog 1, process stopped): further connects hang in SYN_SENT. */
export async function blackhole(): Promise<{ url: string }> {
  const child = spawn(process.execPath, ['-e', "require('net').createServer().listen({port:0,host:'127.0.0.1',backlog:1}, function(){console.log(this.address().port)})"], { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  const port = await new Promise<number>((r) => child.stdout!.once('data', (d) => r(Number(String(d).trim()))));
  process.kill(child.pid!, 'SIGSTOP');
  for (let i = 0; i < 3; i++) {
    const s = connect(port, '127.0.0.1');
    s.on('error', () => undefined);
    stray.push(s);
    await sleep(30);
  }
  return { url: `http://127.0.0.1:${port}` };
}

/**
 * A scripted replica in another process, so it can speak while the test's thread is held busy. `respond` is the
 * source of a function `(req, sock, n)` run there for each complete request (head and content-length body).
 */
export async function processReplica(respond: string): Promise<{ url: string }> {
  const script = `
    const respond = ${respond};
    let n = 0;
    require('net').createServer((sock) => {
      let buf = '';
      sock.on('error', () => {});
      sock.on('data', (d) => {
        buf += d.toString('latin1');
        for (;;) {
          const end = buf.indexOf('\\r\\n\\r\\n');
          if (end === -1) return;
          const len = Number((/content-length: (\\d+)/i.exec(buf.slice(0, end)) || [0, 0])[1]);
          if (buf.length < end + 4 + len) return;
          const req = buf.slice(0, end + 4 + len);
          buf = buf.slice(end + 4 + len);
          respond(req, sock, ++n);
        }
      });
    }).listen(0, '127.0.0.1', function () { console.log(this.address().port); });`;
  const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  const port = await new Promise<number>((r) => child.stdout!.once('data', (d) => r(Number(String(d).trim()))));
  return { url: `http://127.0.0.1:${port}` };
}

/** Holds this thread for `ms` (a long event-loop turn). */
export function spin(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) { /* busy on purpose */ }
}

