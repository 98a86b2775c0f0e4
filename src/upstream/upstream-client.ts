// The upstream client: per replica a pool of keep-alive HTTP/1.1 connections (h1-connection.ts), bounded by
// connections_per_replica, with a FIFO of attempts waiting for one; connect timeout, headers timeout and body
// (idle) timeout; pause/resume mapped onto the socket read; abort destroys the socket, which vLLM sees as a
// client disconnect and answers by aborting the sequence.
// Why not undici: measured in native-bench (`relay`, targets floor vs floor-raw), the bare relay spends 29 %
// less CPU per 19-frame stream and per JSON request on this client than on undici's dispatch path (which
// still allocates per read and runs a wasm parser call per chunk); see README.md here for the figures.
// Thread: main. Hot path: one dispatch per attempt (one string write), one callback per socket read; the
// timeouts cost nothing per request: one sweeper timer per client checks every connection each 100 ms.
import { H1Connection, upstreamError, type H1ConnectionOwner, type H1Exchange } from './h1-connection.ts';
import type { UpstreamFailureKind } from './upstream-errors.ts';

/** Callbacks of one upstream attempt. Exactly one of onEnd / onError is called, once. */
export interface UpstreamHandler {
  onStart(status: number): void;
  /** A view valid only during the call: copy what must outlive it. */
  onData(chunk: Buffer): void;
  onEnd(): void;
  onError(kind: UpstreamFailureKind, err: Error): void;
  /**
   * Optional. Called once per socket read with a function that parses that read: every onStart/onData/onEnd
   * the read produces runs inside `parse`, synchronously. A relay wraps it in one cork of its client socket,
   * so the events of one read leave in one send() (a replica that streams faster than we read packs dozens
   * of SSE events, each its own HTTP chunk, into one read). Must call `parse` exactly once, synchronously.
   */
  batch?(parse: () => void): void;
}

/** Control over one in-flight upstream attempt. */
export interface UpstreamCall {
  pause(): void;
  resume(): void;
  /** Aborts the request: the socket to the replica is destroyed, which vLLM sees as a disconnect. */
  abort(): void;
  readonly done: boolean;
}

export interface UpstreamRequest {
  /** POST when absent (every completion); GET for a stored response. */
  method?: 'GET' | 'POST';
  path: string;
  /** The JSON body, written with the head in one string. */
  body: string;
  /** Extra request headers (values must not contain CR or LF; checked). */
  headers: Record<string, string>;
  /** Time from the request's write to the response head: for streams vLLM sends it at once; for non-streams only at the end. */
  headersTimeoutMs: number;
  /** Longest silence between two reads of the body. */
  bodyTimeoutMs: number;
}

export interface UpstreamClientConfig {
  connect_timeout_ms: number;
  connections_per_replica: number;
}

/** vLLM (uvicorn) closes idle keep-alive sockets after 5 s; stop reusing them before that. */
const KEEP_ALIVE_MS = 4000;
const SWEEP_MS = 100;
const HEADER_VALUE_OK = /^[^\r\n]*$/;

class Attempt implements UpstreamCall, H1Exchange {
  done = false;
  conn: H1Connection | null = null;
  /** performance.now() when it started waiting for a connection: the headers timeout covers the wait. */
  queuedAt = 0;
  private readonly handler: UpstreamHandler;
  private readonly pool: ReplicaPool;
  readonly request: string;
  readonly headersTimeoutMs: number;
  readonly bodyTimeoutMs: number;
  private paused = false;

  constructor(pool: ReplicaPool, request: string, req: UpstreamRequest, handler: UpstreamHandler) {
    this.pool = pool;
    this.request = request;
    this.handler = handler;
    this.headersTimeoutMs = req.headersTimeoutMs;
    this.bodyTimeoutMs = req.bodyTimeoutMs;
  }

  start(conn: H1Connection): void {
    this.conn = conn;
    conn.send(this.request, this);
    if (this.paused) conn.pause();
  }

  onHead(status: number): void {
    if (!this.done) this.handler.onStart(status);
  }

  batch(parse: () => void): void {
    const handler = this.handler;
    if (this.done || handler.batch === undefined) parse();
    else handler.batch(parse);
  }

  onBody(chunk: Buffer): void {
    if (!this.done) this.handler.onData(chunk);
  }

  onComplete(): void {
    if (this.done) return;
    this.done = true;
    this.conn = null;
    this.handler.onEnd();
  }

  onFailure(kind: UpstreamFailureKind, err: Error): void {
    if (this.done) return;
    this.done = true;
    this.conn = null;
    this.handler.onError(kind, err);
  }

  pause(): void {
    this.paused = true;
    this.conn?.pause();
  }

  resume(): void {
    this.paused = false;
    this.conn?.resume();
  }

  abort(): void {
    if (this.done) return;
    const conn = this.conn;
    if (conn !== null) {
      // Destroying the socket is the abort: the replica's server sees the disconnect.
      conn.destroy();
    } else {
      // Still waiting for a connection: leave the queue and settle now.
      this.pool.unqueue(this);
    }
    this.onFailure('aborted', abortError());
  }
}

/** The error of attempts that meet a closed client (shutdown). */
function clientClosed(): Error {
  return upstreamError('UPSTREAM_CLIENT_CLOSED', 'upstream client closed');
}

function abortError(): Error {
  const e = new Error('aborted by the gateway');
  e.name = 'AbortError';
  return e;
}

/** The connections to one replica and the attempts waiting for one. */
class ReplicaPool implements H1ConnectionOwner {
  readonly url: string;
  readonly hostHeader: string;
  private readonly host: string;
  private readonly port: number;
  private readonly cfg: UpstreamClientConfig;
  /** Idle connections, most recently used last (LIFO keeps the warm ones warm). */
  private readonly idle: H1Connection[] = [];
  readonly all = new Set<H1Connection>();
  private readonly queue: Attempt[] = [];
  /** Attempts that found every connection busy and waited in `queue` (the gateway's admission keeps it at 0). */
  waited = 0;
  /** forget(): no connection goes back to idle; queued attempts still run on the busy ones as they free up. */
  private retired = false;
  /** destroyAll(): everything closed, nothing new starts. */
  private destroyed = false;

  constructor(url: string, cfg: UpstreamClientConfig) {
    const u = new URL(url);
    if (u.protocol !== 'http:') throw new Error(`upstream ${url}: only http:// replicas are supported`);
    this.url = url;
    this.host = u.hostname.startsWith('[') ? u.hostname.slice(1, -1) : u.hostname;
    this.port = Number(u.port || 80);
    this.hostHeader = u.host;
    this.cfg = cfg;
  }

  dispatch(a: Attempt): void {
    if (this.destroyed) {
      a.onFailure('aborted', clientClosed());
      return;
    }
    const conn = this.idle.pop();
    if (conn !== undefined) {
      a.start(conn);
      return;
    }
    if (this.all.size < this.cfg.connections_per_replica) {
      a.start(this.open());
      return;
    }
    a.queuedAt = performance.now();
    this.waited++;
    this.queue.push(a);
  }

  unqueue(a: Attempt): void {
    const i = this.queue.indexOf(a);
    if (i !== -1) this.queue.splice(i, 1);
  }

  released(c: H1Connection): void {
    const next = this.destroyed ? undefined : this.queue.shift();
    if (next !== undefined) {
      next.start(c);
      return;
    }
    if (this.retired || this.destroyed) {
      c.destroy();
      return;
    }
    c.idleSince = performance.now();
    this.idle.push(c);
  }

  dropped(c: H1Connection): void {
    this.all.delete(c);
    const i = this.idle.lastIndexOf(c);
    if (i !== -1) this.idle.splice(i, 1);
    // A slot opened up: the oldest waiting attempt gets a new connection.
    if (this.queue.length > 0 && !this.destroyed && this.all.size < this.cfg.connections_per_replica) {
      this.queue.shift()!.start(this.open());
    }
  }

  /** Timeouts and keep-alive expiry, called by the client's sweeper. */
  sweep(now: number): void {
    for (const c of this.all) {
      // Reads since the last pass count as now (h1-connection.ts, lastActivity).
      if (c.readSinceSweep) {
        c.readSinceSweep = false;
        c.lastActivity = now;
      }
      const ex = c.exchange;
      if (ex === null) {
        if (c.idleSince > 0 && now - c.idleSince > KEEP_ALIVE_MS) c.destroy();
        continue;
      }
      // Still connecting: the connect timeout's phase. Paused: the gateway holds the socket, not the replica.
      if (!c.connected || c.paused) continue;
      if (!c.headReceived) {
        if (now - c.sentAt > ex.headersTimeoutMs) {
          c.fail('headers_timeout', upstreamError('UPSTREAM_HEADERS_TIMEOUT', `no response head within ${ex.headersTimeoutMs} ms`));
        }
      } else if (now - c.lastActivity > ex.bodyTimeoutMs) {
        c.fail('body_timeout', upstreamError('UPSTREAM_BODY_TIMEOUT', `no body bytes for ${ex.bodyTimeoutMs} ms`));
      }
    }
    // Waiting for a connection counts against the headers timeout too: a non-stream request has no other bound.
    for (let i = 0; i < this.queue.length; i++) {
      const a = this.queue[i]!;
      if (now - a.queuedAt > a.headersTimeoutMs) {
        this.queue.splice(i--, 1);
        a.onFailure('headers_timeout', upstreamError('UPSTREAM_HEADERS_TIMEOUT', `no connection free within ${a.headersTimeoutMs} ms`));
      }
    }
  }

  /** Closes every connection; waiting attempts fail. */
  destroyAll(): void {
    this.destroyed = true;
    const waiting = this.queue.splice(0);
    for (const c of [...this.all]) c.fail('aborted', clientClosed());
    for (const a of waiting) a.onFailure('aborted', clientClosed());
  }

  /** Stops reuse: idle connections close now, busy ones when their exchange ends; queued attempts still run. */
  retire(): void {
    this.retired = true;
    for (const c of this.idle.splice(0)) c.destroy();
    while (this.queue.length > 0 && this.all.size < this.cfg.connections_per_replica) this.queue.shift()!.start(this.open());
  }

  get empty(): boolean {
    return this.all.size === 0 && this.queue.length === 0;
  }

  private open(): H1Connection {
    const c = new H1Connection(this.host, this.port, this.cfg.connect_timeout_ms, this);
    this.all.add(c);
    return c;
  }
}

export class UpstreamClient {
  private readonly pools = new Map<string, ReplicaPool>();
  /** Pools of replicas that left the fleet, kept until their last exchange ends. */
  private readonly retired = new Set<ReplicaPool>();
  private readonly cfg: UpstreamClientConfig;
  private sweeper: NodeJS.Timeout | null = null;
  private closed = false;

  constructor(cfg: UpstreamClientConfig) {
    this.cfg = cfg;
  }

  dispatch(url: string, req: UpstreamRequest, handler: UpstreamHandler): UpstreamCall {
    let pool = this.pools.get(url);
    if (pool === undefined || this.closed) {
      pool = new ReplicaPool(url, this.cfg);
      if (this.closed) pool.destroyAll(); // the attempt below fails at once: nothing opens after close()
      else {
        this.pools.set(url, pool);
        this.startSweeper();
      }
    }
    const a = new Attempt(pool, renderRequest(pool.hostHeader, req), req, handler);
    pool.dispatch(a);
    return a;
  }

  /** Attempts that had to wait for a free connection, over the replicas the client still serves (tests). */
  get waitedForConnection(): number {
    let n = 0;
    for (const p of this.pools.values()) n += p.waited;
    return n;
  }

  /** Open connections to a replica (for tests and metrics). */
  connections(url: string): number {
    return this.pools.get(url)?.all.size ?? 0;
  }

  /** Drops a replica that left the fleet: no new attempts reuse its connections; those in flight finish. */
  async forget(url: string): Promise<void> {
    const p = this.pools.get(url);
    if (p === undefined) return;
    this.pools.delete(url);
    p.retire();
    if (!p.empty) this.retired.add(p);
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.sweeper !== null) clearInterval(this.sweeper);
    this.sweeper = null;
    for (const p of [...this.pools.values(), ...this.retired]) p.destroyAll();
    this.pools.clear();
    this.retired.clear();
  }

  private startSweeper(): void {
    if (this.sweeper !== null) return;
    this.sweeper = setInterval(() => {
      const now = performance.now();
      for (const p of this.pools.values()) p.sweep(now);
      for (const p of this.retired) {
        p.sweep(now);
        if (p.empty) this.retired.delete(p);
      }
    }, SWEEP_MS);
    this.sweeper.unref();
  }
}

/** The request head and body as one string: one write, no Buffer. */
function renderRequest(hostHeader: string, req: UpstreamRequest): string {
  let head = `${req.method ?? 'POST'} ${req.path} HTTP/1.1\r\nhost: ${hostHeader}\r\n`;
  const h = req.headers;
  for (const k in h) {
    const v = h[k]!;
    if (!HEADER_VALUE_OK.test(v) || !HEADER_VALUE_OK.test(k)) throw new Error(`upstream header ${k} contains CR or LF`);
    head += `${k}: ${v}\r\n`;
  }
  return `${head}content-length: ${Buffer.byteLength(req.body, 'utf8')}\r\n\r\n${req.body}`;
}
