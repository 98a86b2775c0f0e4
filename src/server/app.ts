// The route table on uWS: POST /v1/chat/completions, POST /v1/completions, POST /v1/responses, GET
// /v1/responses/{id}, POST /v1/responses/{id}/cancel, GET /v1/models, GET /v1/models/{id}, /metrics, /healthz, /readyz; OPTIONS on each (CORS preflights answered here, never forwarded); everything else
// 404/405 in the OpenAI envelope, a 405 with `Allow`. A head over server.max_header_bytes is answered 431 on
// any route, and the connection closed. Every response carries x-request-id (the client's when well formed),
// `Keep-Alive: timeout=5` unless the connection closes after it, and, for an allowed browser origin, the CORS
// headers. Request headers are copied synchronously (uWS HttpRequest is invalid after the handler returns),
// onAborted is registered before any await (UwsSink), and the pipeline runs detached from the uWS callback. Graceful shutdown: stop accepting, let in-flight requests finish
// up to a deadline, then abort the rest.
// Thread: main. Hot path: the completion handler's synchronous part.
import { createApp, closeApp, closeListenSocket, listenPort, type HttpRequest, type HttpResponse, type TemplatedApp, type us_listen_socket } from './uws.ts';
import { UwsSink } from './uws-sink.ts';
import { ListenGuard } from './listen-guard.ts';
import { readBody } from './read-request.ts';
import { CorsPolicy } from './cors.ts';
import { checkHead, headBytes, keepsAlive, requestLineBytes } from './request-head.ts';
import { COMPLETION_PATHS, MODEL_PREFIX, allowedMethods, responseIdOf } from './routes.ts';
import { errorBody } from '../errors/openai-error-body.ts';
import { handleCompletion, newContext } from '../pipeline/handle-completion.ts';
import { finishRequest } from '../pipeline/finish-request.ts';
import { forwardStoredResponse } from '../pipeline/stored-response.ts';
import { requestIdFor } from '../pipeline/request-id.ts';
import type { RequestContext } from '../pipeline/request-context.ts';
import type { Services } from '../pipeline/services.ts';
import type { Route } from '../pipeline/parse-body.ts';
import type { HeaderList } from '../relay/client-sink.ts';

const NOT_FOUND = errorBody({ code: 'not_found' });
const METHOD_NOT_ALLOWED = errorBody({ code: 'method_not_allowed' });
const INVALID_API_KEY = errorBody({ code: 'invalid_api_key' });
const SHUTTING_DOWN = errorBody({ code: 'shutting_down' });
const INVALID_FRAMING = errorBody({ code: 'invalid_framing' });
const DUPLICATE_AUTHORIZATION = errorBody({ code: 'invalid_api_key', message: 'Send one Authorization header.' });
const HEAD_TOO_LARGE = errorBody({ code: 'request_header_fields_too_large' });

type Handler = (res: HttpResponse, req: HttpRequest) => void;

export interface ServerHooks {
  metricsText(): Promise<{ contentType: string; body: string }>;
  /** Config loaded and at least one healthy replica per pool. */
  ready(): boolean;
  /** Completion requests in flight changed (acceptor threads publish it for the main thread's count). */
  inflightChanged?(n: number): void;
  /** The listen socket was closed because the process ran out of file descriptors (listen-guard.ts). */
  listenPaused?(): void;
}

export class GatewayServer {
  private readonly app: TemplatedApp;
  private listenSocket: us_listen_socket | null = null;
  private readonly inflight = new Set<RequestContext>();
  /** handleCompletion's settled hook, bound once (not a closure per request). */
  private readonly completionSettled = (ctx: RequestContext): void => {
    this.inflight.delete(ctx);
    this.hooks.inflightChanged?.(this.inflight.size);
  };
  private draining = false;
  private services: Services;
  private cors: CorsPolicy;
  private readonly hooks: ServerHooks;
  private host = '';
  private guard: ListenGuard | null = null;
  port = 0;

  constructor(services: Services, hooks: ServerHooks) {
    this.services = services;
    this.hooks = hooks;
    this.cors = new CorsPolicy(services.cfg.cors);
    const app = createApp();
    // The completion routes size their head in checkHead's one pass; the others go through sized().
    app.post('/v1/chat/completions', (res, req) => this.completion('chat', res, req));
    app.post('/v1/completions', (res, req) => this.completion('completions', res, req));
    app.post('/v1/responses', (res, req) => this.completion('responses', res, req));
    app.get('/v1/responses/*', this.sized((res, req) => this.storedResponse(res, req, false)));
    app.post('/v1/responses/*', this.sized((res, req) => this.storedResponse(res, req, true)));
    app.get('/v1/models', this.sized((res, req) => this.models(res, req, null)));
    app.get('/v1/models/*', this.sized((res, req) => this.models(res, req, req.getUrl().slice(MODEL_PREFIX.length))));
    app.get('/healthz', this.sized((res, req) => this.plain(this.open(res, req), 200, 'ok')));
    app.get('/readyz', this.sized((res, req) => {
      const ok = !this.draining && this.hooks.ready();
      this.plain(this.open(res, req), ok ? 200 : 503, ok ? 'ready' : 'not ready');
    }));
    app.get('/metrics', this.sized((res, req) => this.metrics(this.open(res, req))));
    app.options('/*', this.sized((res, req) => this.options(res, req)));
    app.any('/*', this.sized((res, req) => {
      const allow = allowedMethods(req.getUrl());
      // The answer to HEAD has no body (RFC 9110 §9.3.2): a body would be read as the start of the next response.
      const head = req.getMethod() === 'head';
      const sink = this.open(res, req);
      if (allow === undefined) this.json(sink, 404, NOT_FOUND, [], head);
      else this.json(sink, 405, METHOD_NOT_ALLOWED, [['allow', allow]], head);
    }));
    this.app = app;
  }

  /**
   * A route handler behind the head-size cap: over server.max_header_bytes the request is answered 431 and
   * the connection closed (a client that sent one oversized head is likely to send the next one too). Cost: one forEach
   * and three native getters per request, on routes off the completion path.
   */
  private sized(handler: Handler): Handler {
    return (res, req) => {
      const method = req.getMethod();
      if (headBytes(req, requestLineBytes(req, method, req.getUrl())) <= this.services.cfg.server.max_header_bytes) {
        handler(res, req);
        return;
      }
      // HEAD keeps its connection: this build's endWithoutBody cannot also close it, and no body follows a HEAD.
      const head = method === 'head';
      this.json(this.open(res, req), 431, HEAD_TOO_LARGE, [], head, !head);
    };
  }

  /** Swaps the services after a config reload; requests in flight keep the ones they started with. */
  setServices(s: Services): void {
    this.services = s;
    this.cors = new CorsPolicy(s.cfg.cors);
  }

  listen(host: string, port: number): Promise<number> {
    return new Promise((resolve, reject) => {
      this.app.listen(host, port, (sock) => {
        if (!sock) {
          reject(new Error(`cannot listen on ${host}:${port}`));
          return;
        }
        this.listenSocket = sock;
        this.host = host;
        this.port = listenPort(sock);
        this.guardListen();
        resolve(this.port);
      });
    });
  }

  /** Whether the listen socket is closed because the process is at its open-file limit. */
  get listenPaused(): boolean {
    return this.guard?.paused ?? false;
  }

  /**
   * Closes the listen socket while the process has no descriptor free and re-listens on the bound port (also
   * when configured as 0) once some are. With acceptor threads each thread does this for its own socket.
   */
  private guardListen(): void {
    if (this.guard !== null) return;
    const log = (): Services['log'] => this.services.log;
    const where = { component: 'server', host: this.host, port: this.port };
    this.guard = new ListenGuard({
      close: () => {
        if (this.listenSocket !== null) closeListenSocket(this.listenSocket);
        this.listenSocket = null;
      },
      listen: () => {
        if (this.draining) return false;
        this.app.listen(this.host, this.port, (sock) => { if (sock) this.listenSocket = sock; });
        return this.listenSocket !== null;
      },
      paused: (margin) => {
        this.hooks.listenPaused?.();
        log().warn({ ...where, resume_when_free: margin }, 'open-file limit reached: stopped accepting connections');
      },
      resumed: (free) => log().info({ ...where, free_descriptors: free }, 'descriptors free again: accepting connections'),
      relistenFailed: (attempt) => {
        // Every probe retries; log the first failure and then one in 25 (about every 5 s).
        if (attempt % 25 === 1) log().error({ ...where, attempt }, 'cannot listen again on the port; retrying');
      },
      unavailable: (reason) => log().warn({ ...where, reason }, 'open-file limit guard off'),
    }, undefined, undefined, this.services.cfg.server.threads);
    this.guard.start();
  }

  get inflightCount(): number {
    return this.inflight.size;
  }

  /** Stops accepting, waits for in-flight requests up to graceMs, then aborts what is left. */
  async shutdown(graceMs: number): Promise<void> {
    this.draining = true;
    this.guard?.stop();
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

  /** Closes every connection left (idle keep-alives included) so an acceptor thread's loop can end. */
  closeConnections(): void {
    this.guard?.stop();
    closeApp(this.app);
  }

  private completion(route: Route, res: HttpResponse, req: HttpRequest): void {
    const sink = new UwsSink(res, keepsAlive(req));
    const svc = this.services;
    // Copy what we need from req now: it is invalid after this function returns.
    const authorization = req.getHeader('authorization') || undefined;
    const requestId = req.getHeader('x-request-id') || undefined;
    const contentLength = Number(req.getHeader('content-length') || 0);
    const problem = checkHead(req, svc.cfg.server.max_header_bytes, requestLineBytes(req, 'POST', COMPLETION_PATHS[route]));
    if (this.cors.enabled) this.corsFor(sink, req);
    const ctx = newContext(route, sink, requestId);
    // Tracing (decided at start): the client's trace context is read only when it is on.
    const tracing = svc.tracing;
    if (tracing != null) ctx.trace = tracing.begin(route, svc.router.policy.name, ctx.startedAt, req.getHeader('traceparent'), req.getHeader('tracestate'));
    // Authenticate before anything else refuses: a refused request that carried a valid key still leaves its
    // usage record (the tenant is known). Before the body is read: an unauthenticated client reserves no memory.
    // Two Authorization headers name no one tenant: neither is tried.
    const tenant = problem === 'duplicate_authorization' ? null : svc.auth.authenticate(authorization);
    ctx.tenant = tenant;
    if (problem === 'too_large') {
      this.json(sink, 431, HEAD_TOO_LARGE, [['x-request-id', ctx.id]], false, true);
      this.refused(svc, ctx, 431, 'request_header_fields_too_large');
      return;
    }
    if (problem === 'framing') {
      // The body's end is ambiguous, so nothing after it on this connection can be trusted: close it.
      this.json(sink, 400, INVALID_FRAMING, [['x-request-id', ctx.id]], false, true);
      this.refused(svc, ctx, 400, 'invalid_framing');
      return;
    }
    if (this.draining) {
      // Closed after the answer (uWS says `Connection: close`): the client reconnects, to another instance.
      this.json(sink, 503, SHUTTING_DOWN, [['x-request-id', ctx.id], ['retry-after', '1']], false, true);
      this.refused(svc, ctx, 503, 'shutting_down');
      return;
    }
    if (problem === 'content_type') {
      this.json(sink, 415, errorBody({ code: 'unsupported_media_type' }), [['x-request-id', ctx.id]]);
      this.refused(svc, ctx, 415, 'unsupported_media_type');
      return;
    }
    if (tenant === null) {
      this.json(sink, 401, problem === 'duplicate_authorization' ? DUPLICATE_AUTHORIZATION : INVALID_API_KEY, [['x-request-id', ctx.id]]);
      this.refused(svc, ctx, 401, 'invalid_api_key');
      return;
    }
    const body = readBody(res, sink, Number.isFinite(contentLength) ? contentLength : 0, svc.cfg.server.max_body_bytes, ctx.id);
    this.inflight.add(ctx);
    this.hooks.inflightChanged?.(this.inflight.size);
    // handleCompletion never rejects; its settled hook takes the request off the in-flight list.
    void handleCompletion(svc, ctx, { route, tenant, body, settled: this.completionSettled });
  }

  /** A completion answered before the pipeline ran: counted in metrics and the log, and in usage when its key was valid. */
  private refused(svc: Services, ctx: RequestContext, status: number, code: string): void {
    ctx.status = status;
    ctx.code = code;
    try {
      finishRequest(svc, ctx)?.catch((err: unknown) => svc.log.error({ err, request_id: ctx.id }, 'request settlement failed'));
    } catch (err) {
      svc.log.error({ err, request_id: ctx.id }, 'request settlement failed');
    }
  }

  /**
   * The sink for a response outside the completion pipeline, with its request id and, for an allowed browser
   * origin, the CORS headers. Reads req: call it before any await.
   */
  private open(res: HttpResponse, req: HttpRequest): UwsSink {
    const sink = new UwsSink(res, keepsAlive(req));
    const id: HeaderList = [['x-request-id', requestIdFor(req.getHeader('x-request-id') || undefined)]];
    if (this.cors.enabled) this.corsFor(sink, req);
    sink.extra = sink.extra === null ? id : [...id, ...sink.extra];
    return sink;
  }

  /** Sets the sink's CORS headers when the request comes from an allowed origin. */
  private corsFor(sink: UwsSink, req: HttpRequest): void {
    const origin = req.getHeader('origin');
    if (origin !== '') sink.extra = this.cors.actual(origin);
  }

  /** OPTIONS: a CORS preflight (or a plain OPTIONS) answered by the gateway, 204 with the route's methods. */
  private options(res: HttpResponse, req: HttpRequest): void {
    const allow = allowedMethods(req.getUrl());
    const origin = this.cors.enabled ? req.getHeader('origin') : '';
    const preflight = origin !== '' && req.getHeader('access-control-request-method') !== '';
    const requestHeaders = preflight ? req.getHeader('access-control-request-headers') : '';
    const sink = this.open(res, req);
    if (allow === undefined) {
      this.json(sink, 404, NOT_FOUND);
      return;
    }
    if (preflight) {
      // The actual-response headers open() set are replaced by the preflight's (one Allow-Origin, not two).
      const cors = this.cors.preflight(origin, requestHeaders, allow);
      sink.extra = [sink.extra![0]!, ...(cors ?? [])];
    }
    sink.begin(204, [['allow', allow]]);
    sink.endWithoutBody();
  }

  /** GET /v1/responses/{id} (cancel false) or POST /v1/responses/{id}/cancel: to the replica that stored it. */
  private storedResponse(res: HttpResponse, req: HttpRequest, cancel: boolean): void {
    const svc = this.services;
    const url = req.getUrl();
    const target = responseIdOf(url);
    const authorization = req.getHeader('authorization') || undefined;
    const sink = this.open(res, req);
    if (target === null || target.cancel !== cancel) {
      const allow = allowedMethods(url);
      if (allow === undefined) this.json(sink, 404, NOT_FOUND);
      else this.json(sink, 405, METHOD_NOT_ALLOWED, [['allow', allow]]);
      return;
    }
    const tenant = svc.auth.authenticate(authorization);
    if (tenant === null) {
      this.json(sink, 401, INVALID_API_KEY);
      return;
    }
    const requestId = sink.extra![0]![1];
    // With acceptor threads, the id may still be on its way from the thread that relayed it.
    const arrival = svc.responses.whenKnown(target.id, tenant.name);
    if (arrival === null) forwardStoredResponse(svc, sink, requestId, tenant, target.id, cancel);
    else void arrival.then(() => forwardStoredResponse(svc, sink, requestId, tenant, target.id, cancel));
  }

  private models(res: HttpResponse, req: HttpRequest, id: string | null): void {
    const svc = this.services;
    const authorization = req.getHeader('authorization') || undefined;
    const sink = this.open(res, req);
    if (svc.auth.authenticate(authorization) === null) {
      this.json(sink, 401, INVALID_API_KEY);
      return;
    }
    if (id === null) {
      this.json(sink, 200, svc.catalog.modelsBody);
      return;
    }
    // The openai SDK percent-encodes the id (a '/' becomes %2F); other clients send it raw. Both name one model.
    let name: string;
    try {
      name = decodeURIComponent(id);
    } catch {
      name = id;
    }
    const body = svc.catalog.modelBody(name);
    if (body !== undefined) this.json(sink, 200, body);
    else this.json(sink, 404, errorBody({ code: 'model_not_found', param: 'model', message: `The model \`${name}\` does not exist.` }));
  }

  private metrics(sink: UwsSink): void {
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

  private plain(sink: UwsSink, status: number, text: string): void {
    sink.begin(status, [['content-type', 'text/plain']]);
    sink.end(text);
  }

  /** `head`: the answer to HEAD (headers only); `close`: the connection is closed after the response (not with `head`). */
  private json(sink: UwsSink, status: number, body: string, extra: HeaderList = [], head = false, close = false): void {
    if (close) sink.keepAlive = false;
    sink.begin(status, [['content-type', 'application/json'], ...extra]);
    if (head) sink.endWithoutBody();
    else sink.end(body, close);
  }
}
