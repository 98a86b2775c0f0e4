// The upstream client: one undici Pool per replica URL (keep-alive, bounded connections, connect timeout),
// driven through undici's low-level dispatch() so the relay sees raw Buffers and can pause the socket read
// when the client is slow. Thread: main. Hot path: one dispatch per attempt, one callback per upstream chunk.
// Why dispatch and not request()/fetch(): no Readable stream or WHATWG stream per response, no per-chunk
// promise; pause/resume map straight onto the socket (measured in native-bench/scenarios/relay.ts).
import { Pool } from 'undici';
import type { Dispatcher } from 'undici';
import type { GatewayConfig } from '../config/schema.ts';
import { classifyUpstreamError, type UpstreamFailureKind } from './upstream-errors.ts';

/** Callbacks of one upstream attempt. Exactly one of onEnd / onError is called, once. */
export interface UpstreamHandler {
  onStart(status: number, headers: Record<string, string | string[] | undefined>): void;
  onData(chunk: Buffer): void;
  onEnd(): void;
  onError(kind: UpstreamFailureKind, err: Error): void;
}

/** Control over one in-flight upstream attempt. */
export interface UpstreamCall {
  pause(): void;
  resume(): void;
  /** Aborts the request: the socket to the replica is destroyed, which vLLM sees as a disconnect. */
  abort(): void;
  readonly done: boolean;
}

class Attempt implements UpstreamCall, Dispatcher.DispatchHandler {
  done = false;
  private controller: Dispatcher.DispatchController | null = null;
  private abortRequested = false;
  private readonly handler: UpstreamHandler;

  constructor(handler: UpstreamHandler) {
    this.handler = handler;
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.abortRequested) controller.abort(abortError());
  }

  onResponseStart(_c: Dispatcher.DispatchController, statusCode: number, headers: Record<string, string | string[] | undefined>): void {
    if (this.done) return;
    this.handler.onStart(statusCode, headers);
  }

  onResponseData(_c: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.done) return;
    this.handler.onData(chunk);
  }

  onResponseEnd(): void {
    if (this.done) return;
    this.done = true;
    this.handler.onEnd();
  }

  onResponseError(_c: Dispatcher.DispatchController, err: Error): void {
    if (this.done) return;
    this.done = true;
    this.handler.onError(classifyUpstreamError(err, this.abortRequested), err);
  }

  pause(): void {
    this.controller?.pause();
  }

  resume(): void {
    this.controller?.resume();
  }

  abort(): void {
    if (this.done || this.abortRequested) return;
    this.abortRequested = true;
    if (this.controller !== null) {
      this.controller.abort(abortError());
      return;
    }
    // Still queued in the replica's Pool (every connection busy, or connecting): settle now instead of when a
    // connection frees up; when undici reaches it, onRequestStart aborts it before a byte is written.
    this.done = true;
    this.handler.onError('aborted', abortError());
  }
}

function abortError(): Error {
  const e = new Error('aborted by the gateway');
  e.name = 'AbortError';
  return e;
}

export interface UpstreamRequest {
  path: string;
  body: Buffer;
  headers: Record<string, string>;
  /** undici's headers timeout: for streams vLLM sends headers at once; for non-streams only at the end. */
  headersTimeoutMs: number;
  /** Longest silence between body chunks. */
  bodyTimeoutMs: number;
}

export class UpstreamClient {
  private readonly pools = new Map<string, Pool>();
  private readonly cfg: GatewayConfig['upstream'];

  constructor(cfg: GatewayConfig['upstream']) {
    this.cfg = cfg;
  }

  private pool(url: string): Pool {
    let p = this.pools.get(url);
    if (p === undefined) {
      p = new Pool(url, {
        connections: this.cfg.connections_per_replica,
        connect: { timeout: this.cfg.connect_timeout_ms },
        // vLLM (uvicorn) closes idle keep-alive sockets after 5 s; reuse them for less than that.
        keepAliveTimeout: 4000,
        keepAliveMaxTimeout: 4000,
        pipelining: 1,
      });
      this.pools.set(url, p);
    }
    return p;
  }

  dispatch(url: string, req: UpstreamRequest, handler: UpstreamHandler): UpstreamCall {
    const attempt = new Attempt(handler);
    this.pool(url).dispatch({
      origin: url,
      path: req.path,
      method: 'POST',
      headers: req.headers,
      body: req.body,
      headersTimeout: req.headersTimeoutMs,
      bodyTimeout: req.bodyTimeoutMs,
      blocking: true,
      idempotent: false,
    }, attempt);
    return attempt;
  }

  /** Drops the pool of a replica that left the fleet. */
  async forget(url: string): Promise<void> {
    const p = this.pools.get(url);
    if (p === undefined) return;
    this.pools.delete(url);
    await p.close().catch(() => undefined);
  }

  async close(): Promise<void> {
    const all = [...this.pools.values()];
    this.pools.clear();
    await Promise.all(all.map((p) => p.destroy().catch(() => undefined)));
  }
}
