// The route table on uWS: POST /v1/chat/completions, POST /v1/completions, GET /v1/models, /metrics,
// /healthz, /readyz; everything else 404/405 in the OpenAI envelope. Request headers are copied synchronously
// (uWS HttpRequest is invalid after the handler returns), onAborted is registered before any await (UwsSink),
// and the pipeline runs detached from the uWS callback. Graceful shutdown: stop accepting, let in-flight
// requests finish up to a deadline, then abort the rest.
// Thread: main. Hot path: the completion handler's synchronous part.
import { createApp, closeListenSocket, listenPort, type HttpRequest, type HttpResponse, type TemplatedApp, type us_listen_socket } from './uws.ts';
import { UwsSink } from './uws-sink.ts';
import { readBody } from './read-request.ts';
import { errorBody } from '../errors/openai-error-body.ts';
import { handleCompletion, newContext } from '../pipeline/handle-completion.ts';
import { finishRequest } from '../pipeline/finish-request.ts';
import type { RequestContext } from '../pipeline/request-context.ts';
import type { Services, TenantIdentity } from '../pipeline/services.ts';
import type { Route } from '../pipeline/parse-body.ts';

export interface ServerHooks {
  metricsText(): Promise<{ contentType: string; body: string }>;
  /** Config loaded and at least one healthy replica per pool. */
  ready(): boolean;
}

export class GatewayServer {
  private readonly app: TemplatedApp;
  private listenSocket: us_listen_socket | null = null;
  private readonly inflight = new Set<RequestContext>();
  private draining = false;
  private services: Services;
  private readonly hooks: ServerHooks;
  port = 0;

  constructor(services: Services, hooks: ServerHooks) {
    this.services = services;
    this.hooks = hooks;
    const app = createApp();
    app.post('/v1/chat/completions', (res, req) => this.completion('chat', res, req));
    app.post('/v1/completions', (res, req) => this.completion('completions', res, req));
    app.get('/v1/models', (res, req) => this.models(res, req));
    app.get('/healthz', (res) => this.plain(res, 200, 'ok'));
    app.get('/readyz', (res) => {
      const ok = !this.draining && this.hooks.ready();
      this.plain(res, ok ? 200 : 503, ok ? 'ready' : 'not ready');
    });
    app.get('/metrics', (res) => this.metrics(res));
    app.any('/*', (res, req) => {
      const known = ['/v1/chat/completions', '/v1/completions', '/v1/models', '/healthz', '/readyz', '/metrics'].includes(req.getUrl());
      this.json(res, known ? 405 : 404, errorBody({ code: known ? 'method_not_allowed' : 'not_found' }));
    });
    this.app = app;
  }

  /** Swaps the services after a config reload; requests in flight keep the ones they started with. */
  setServices(s: Services): void {
    this.services = s;
  }

  listen(host: string, port: number): Promise<number> {
    return new Promise((resolve, reject) => {
      this.app.listen(host, port, (sock) => {
        if (!sock) {
          reject(new Error(`cannot listen on ${host}:${port}`));
          return;
        }
        this.listenSocket = sock;
        this.port = listenPort(sock);
        resolve(this.port);
      });
    });
  }

  get inflightCount(): number {
    return this.inflight.size;
  }

  /** Stops accepting, waits for in-flight requests up to graceMs, then aborts what is left. */
  async shutdown(graceMs: number): Promise<void> {
    this.draining = true;
    if (this.listenSocket !== null) {
      closeListenSocket(this.listenSocket);
      this.listenSocket = null;
    }
    const deadline = Date.now() + graceMs;
    while (this.inflight.size > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    for (const ctx of this.inflight) {
      // Mark first: the aborts below make stages fail, and they must answer shutting_down, not retry or 400.
      ctx.shutdownAborted = true;
      ctx.abortSignal();
      ctx.call?.abort();
    }
    while (this.inflight.size > 0 && Date.now() < deadline + 2000) await new Promise((r) => setTimeout(r, 10));
  }

  private completion(route: Route, res: HttpResponse, req: HttpRequest): void {
    const sink = new UwsSink(res);
    // Copy what we need from req now: it is invalid after this function returns.
    const authorization = req.getHeader('authorization') || undefined;
    const requestId = req.getHeader('x-request-id') || undefined;
    const contentType = req.getHeader('content-type');
    const contentLength = Number(req.getHeader('content-length') || 0);
    const svc = this.services;
    const ctx = newContext(route, sink, requestId);
    if (this.draining) {
      this.json(res, 503, errorBody({ code: 'shutting_down' }), [['retry-after', '1'], ['connection', 'close']], sink);
      this.refused(svc, ctx, 503, 'shutting_down');
      return;
    }
    if (contentType && !contentType.toLowerCase().startsWith('application/json')) {
      this.json(res, 415, errorBody({ code: 'unsupported_media_type' }), [['x-request-id', ctx.id]], sink);
      this.refused(svc, ctx, 415, 'unsupported_media_type');
      return;
    }
    // Authenticate before reading (and allocating) the body: an unauthenticated client reserves no memory.
    const tenant = svc.auth.authenticate(authorization);
    if (tenant === null) {
      this.json(res, 401, errorBody({ code: 'invalid_api_key' }), [['x-request-id', ctx.id]], sink);
      this.refused(svc, ctx, 401, 'invalid_api_key');
      return;
    }
    const body = readBody(res, sink, Number.isFinite(contentLength) ? contentLength : 0, svc.cfg.server.max_body_bytes);
    this.inflight.add(ctx);
    void this.runCompletion(svc, ctx, route, tenant, body);
  }

  /** One async frame instead of .catch().finally(): two promises and four closures fewer per request. */
  private async runCompletion(svc: Services, ctx: RequestContext, route: Route, tenant: TenantIdentity, body: Promise<Buffer | null>): Promise<void> {
    try {
      await handleCompletion(svc, ctx, { route, tenant, body });
    } catch (err) {
      svc.log.error({ err, request_id: ctx.id }, 'request settlement failed');
    } finally {
      this.inflight.delete(ctx);
    }
  }

  /** A completion answered before the pipeline ran still counts in metrics and the log (no tenant yet, so no usage record). */
  private refused(svc: Services, ctx: RequestContext, status: number, code: string): void {
    ctx.status = status;
    ctx.code = code;
    finishRequest(svc, ctx).catch((err: unknown) => svc.log.error({ err, request_id: ctx.id }, 'request settlement failed'));
  }

  private models(res: HttpResponse, req: HttpRequest): void {
    const svc = this.services;
    if (svc.auth.authenticate(req.getHeader('authorization') || undefined) === null) {
      this.json(res, 401, errorBody({ code: 'invalid_api_key' }));
      return;
    }
    this.json(res, 200, svc.catalog.modelsBody);
  }

  private metrics(res: HttpResponse): void {
    const sink = new UwsSink(res);
    this.hooks.metricsText().then(({ contentType, body }) => {
      sink.cork(() => {
        sink.begin(200, [['content-type', contentType]]);
        sink.end(body);
      });
    }, (err: unknown) => {
      this.services.log.error({ err }, 'metrics render failed');
      sink.cork(() => {
        sink.begin(500, [['content-type', 'application/json']]);
        sink.end(errorBody({ code: 'internal_error' }));
      });
    });
  }

  private plain(res: HttpResponse, status: number, text: string): void {
    const sink = new UwsSink(res);
    sink.begin(status, [['content-type', 'text/plain']]);
    sink.end(text);
  }

  private json(res: HttpResponse, status: number, body: string, extra: Array<[string, string]> = [], existing?: UwsSink): void {
    const sink = existing ?? new UwsSink(res);
    sink.begin(status, [['content-type', 'application/json'], ...extra]);
    sink.end(body);
  }
}
