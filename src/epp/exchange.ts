// One ext_proc stream: one HTTP request through Envoy, from its headers to the end of its response.
//   request_headers → (request_body chunks, FULL_DUPLEX_STREAMED, to end_of_stream; over epp.max_body_bytes: 413)
//   → the standalone request pipeline (handleCompletion: parse, tokenize, quota for a named tenant, admission,
//     routing) with this exchange as its client sink and its upstream: the pipeline's "dispatch" is the pick,
//     answered as the request-headers response (x-gateway-destination-endpoint, Content-Length,
//     clear_route_cache, envoy.lb metadata) and the body echoed unchanged; its error replies are
//     ImmediateResponses (429 shed with Retry-After, 503 no replica, 400, 404, 413…)
//   → response_headers / response_body chunks echoed as they arrive and fed to the pipeline's attempt as if a
//     replica's socket had produced them (first token, usage, cached_tokens, the end): the ledger, the router's
//     feedback and the GPU-time model are released and fed exactly as in the standalone path.
// A stream Envoy closes before the response ended is a client gone: the pipeline's abort releases everything.
// Thread: main. Hot path: onResponseBody per chunk (one echo write, one onData into the relay).
import type { ClientSink, HeaderList } from '../relay/client-sink.ts';
import type { UpstreamCall, UpstreamHandler, UpstreamRequest } from '../upstream/upstream-client.ts';
import type { Router } from '../router/route.ts';
import type { Decision, RouteRequest } from '../router/types.ts';
import type { Services, TenantIdentity } from '../pipeline/services.ts';
import type { Route } from '../pipeline/parse-body.ts';
import { handleCompletion, newContext } from '../pipeline/handle-completion.ts';
import { errorBody } from '../errors/openai-error-body.ts';
import { echo, headerValue, immediate, MAX_STREAMED_CHUNK, pickResponse, REQUEST_TRAILERS_CONTINUE, RESPONSE_HEADERS_CONTINUE, RESPONSE_TRAILERS_CONTINUE, setHeader, subsetHint, type HeaderValue, type HeaderValueOption, type ProcessingRequest, type ProcessingResponse } from './ext-proc-messages.ts';
import { GRPC_STATUS, type ProcessStream } from './grpc-transport.ts';
import { isUnmetered, UNMETERED, type EppBase } from './epp-services.ts';
import type { EndpointBook } from './endpoints.ts';

const ROUTES: Record<string, Route> = { '/v1/chat/completions': 'chat', '/v1/completions': 'completions', '/v1/responses': 'responses' };
const NO_HASHES = new Float64Array(0);
const ABORTED = new Error('the ext_proc stream ended before the response did');

type Phase = 'headers' | 'body' | 'picking' | 'picked' | 'done';

export interface ExchangeEnv {
  base(): EppBase;
  readonly book: EndpointBook;
}

export class Exchange implements ClientSink, UpstreamCall {
  private phase: Phase = 'headers';
  private readonly stream: ProcessStream;
  private readonly env: ExchangeEnv;
  private path = '';
  private method = '';
  private requestId: string | undefined = undefined;
  private tenant: TenantIdentity = UNMETERED;
  private hint: string[] | null = null;
  private chunks: Buffer[] = [];
  private bodyBytes = 0;
  private requestTrailers = false;
  // ClientSink: before the pick an answer becomes an ImmediateResponse; after it, Envoy relays the replica's bytes.
  aborted = false;
  started = false;
  private status = 0;
  private headers: HeaderList = [];
  private onAbort: (() => void) | null = null;
  // The pipeline's attempt, fed by the response phase.
  private handler: UpstreamHandler | null = null;
  private routeReq: RouteRequest | null = null;
  private decision: Decision | null = null;
  private routeHeader: HeaderValueOption[] | null = null;
  private timer: NodeJS.Timeout | null = null;
  private deadlineMs = 0;
  private idleMs = 0;
  private lastAt = 0;
  private responseStarted = false;
  /** Our side of the stream was ended (or closed with a status). */
  private ended = false;
  done = false;

  constructor(stream: ProcessStream, env: ExchangeEnv) {
    this.stream = stream;
    this.env = env;
    stream.on('data', (m) => this.onMessage(m));
    stream.on('end', () => this.closedByEnvoy(true));
    stream.on('cancelled', () => this.closedByEnvoy(false));
    stream.on('error', () => this.closedByEnvoy(false));
    // grpc-js buffers what Envoy cannot take yet: stop reading Envoy's messages until it drains.
    stream.on('drain', () => stream.resume());
  }

  private send(m: ProcessingResponse): void {
    if (this.ended || this.stream.cancelled) return;
    if (!this.stream.write(m)) this.stream.pause();
  }

  private onMessage(m: ProcessingRequest): void {
    switch (m.request) {
      case 'request_headers': return this.onRequestHeaders(m);
      case 'request_body': return this.onRequestBody(m.request_body!.body, m.request_body!.end_of_stream === true);
      case 'request_trailers':
        this.requestTrailers = true;
        return this.onRequestBody(undefined, true);
      case 'response_headers': return this.onResponseHeaders(m.response_headers!.headers?.headers ?? [], m.response_headers!.end_of_stream === true);
      case 'response_body': return this.onResponseBody(m.response_body!.body, m.response_body!.end_of_stream === true);
      case 'response_trailers':
        this.send(RESPONSE_TRAILERS_CONTINUE);
        return this.responseEnded();
      case undefined: return this.protocolError(GRPC_STATUS.INVALID_ARGUMENT, 'a ProcessingRequest with no request set');
    }
  }

  private onRequestHeaders(m: ProcessingRequest): void {
    if (this.phase !== 'headers') return this.protocolError(GRPC_STATUS.FAILED_PRECONDITION, 'request_headers twice on one stream');
    if (m.observability_mode === true) return this.protocolError(GRPC_STATUS.FAILED_PRECONDITION, 'observability_mode: an endpoint picker must answer');
    const tenantHeader = this.env.base().epp.tenant_header;
    for (const h of m.request_headers!.headers?.headers ?? []) this.readHeader(h, tenantHeader);
    this.hint = subsetHint(m);
    if (m.request_headers!.end_of_stream === true) {
      this.phase = 'picking';
      return this.pickOnHeaders(null);
    }
    this.phase = 'body';
  }

  private readHeader(h: HeaderValue, tenantHeader: string | undefined): void {
    const key = h.key;
    if (key === ':path') this.path = headerValue(h);
    else if (key === ':method') this.method = headerValue(h);
    else if (key === 'x-request-id') this.requestId = headerValue(h);
    else if (key === tenantHeader) this.tenant = this.env.base().tenants.get(headerValue(h)) ?? UNMETERED;
  }

  private onRequestBody(chunk: Buffer | undefined, end: boolean): void {
    if (this.phase !== 'body') {
      if (this.phase === 'picked' && this.requestTrailers) return this.send(REQUEST_TRAILERS_CONTINUE);
      return this.protocolError(GRPC_STATUS.FAILED_PRECONDITION, 'request_body outside the request body phase');
    }
    if (chunk !== undefined && chunk.length > 0) {
      this.bodyBytes += chunk.length;
      if (this.bodyBytes > this.env.base().epp.max_body_bytes) {
        this.chunks = [];
        return this.reply(413, [['content-type', 'application/json']], errorBody({ code: 'request_too_large' }), 'request body over epp.max_body_bytes');
      }
      this.chunks.push(chunk);
    }
    if (!end) return;
    this.phase = 'picking';
    const route = this.method === 'POST' ? ROUTES[pathOnly(this.path)] : undefined;
    if (route === undefined) return this.pickOnHeaders(this.bodyBytes);
    this.runPipeline(route);
  }

  /** A completion request: the standalone pipeline, with this exchange as its sink and its upstream. */
  private runPipeline(route: Route): void {
    const base = this.env.base();
    const subset = this.subsetSlots();
    if (subset === null) return;
    const router = base.services.router;
    // The attempt tells the router it dispatched just before it dispatches: that is where the request and the
    // decision are kept, for the fallbacks and the route explanation.
    const view = Object.create(router) as Router;
    view.dispatched = (req: RouteRequest, d: Decision) => {
      this.routeReq = req;
      this.decision = d;
      router.dispatched(req, d);
    };
    const svc: Services = { ...base.services, upstream: this as unknown as Services['upstream'], router: view };
    const ctx = newContext(route, this, this.requestId);
    const body = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks);
    void handleCompletion(svc, ctx, { route, tenant: this.tenant, body: Promise.resolve(body), ...(subset.length > 0 ? { subset } : {}) });
  }

  /** The slots the subset hint allows ([] when there is no hint); null when it names none of the pool (answered 503). */
  private subsetSlots(): number[] | null {
    if (this.hint === null) return [];
    const slots = this.env.book.slotsOf(this.hint);
    if (slots.length > 0) return slots;
    this.reply(503, [['content-type', 'application/json'], ['retry-after', '1']], errorBody({
      code: 'no_healthy_replica', message: `None of the subset hint's endpoints (${this.hint.join(', ')}) is a replica of this pool.`,
    }), 'subset hint names no replica of the pool');
    return null;
  }

  /** A request with no completion body (headers only, another path): picked on what it has, nothing reserved. */
  private pickOnHeaders(contentLength: number | null): void {
    const subset = this.subsetSlots();
    if (subset === null) return;
    const base = this.env.base();
    const req: RouteRequest = { poolId: base.epp.pool, adapter: null, promptTokens: 0, maxTokens: 0, blockHashes: NO_HASHES, excluded: [] };
    if (subset.length > 0) req.subset = subset;
    const r = base.services.router.route(req);
    if (!r.ok) {
      return this.reply(503, [['content-type', 'application/json'], ['retry-after', '1']], errorBody({ code: 'no_healthy_replica' }), 'no healthy replica');
    }
    this.routeReq = req;
    this.answerPick(r.slot, contentLength);
  }

  /** UpstreamClient.dispatch, as the pipeline's attempt calls it: the pick is made; tell Envoy, then follow the response. */
  dispatch(_url: string, request: UpstreamRequest, handler: UpstreamHandler): UpstreamCall {
    this.handler = handler;
    const d = this.decision!;
    const svc = this.env.base().services;
    if (svc.cfg.expose_route_header && this.routeReq !== null) this.routeHeader = [setHeader('x-gateway-route', svc.router.header(this.routeReq, d))];
    this.answerPick(d.slot, this.bodyBytes);
    // A gateway that sends no response phase (or a response that never starts): released after the standalone
    // path's own deadline for a replica's response head, then the longest silence between body reads.
    this.deadlineMs = request.headersTimeoutMs;
    this.idleMs = request.bodyTimeoutMs;
    this.lastAt = performance.now();
    this.timer = setTimeout(this.onTimer, this.deadlineMs);
    return this;
  }

  private answerPick(primary: number, contentLength: number | null): void {
    const base = this.env.base();
    const endpoints = this.env.book.withFallbacks(base.services.router, this.routeReq, primary, base.epp.fallbacks);
    this.phase = 'picked';
    this.started = true;
    this.send(pickResponse(endpoints, contentLength, []));
    const chunks = this.chunks;
    this.chunks = [];
    if (contentLength === null) return;
    if (chunks.length === 0) this.send(echo('request_body', Buffer.alloc(0), true));
    for (let i = 0; i < chunks.length; i++) this.echoSplit('request_body', chunks[i]!, i === chunks.length - 1);
    if (this.requestTrailers) this.send(REQUEST_TRAILERS_CONTINUE);
  }

  /** Echoes a chunk unchanged, in pieces of at most MAX_STREAMED_CHUNK bytes (views, not copies). */
  private echoSplit(direction: 'request_body' | 'response_body', chunk: Buffer, last: boolean): void {
    if (chunk.length <= MAX_STREAMED_CHUNK) return this.send(echo(direction, chunk, last));
    for (let at = 0; at < chunk.length; at += MAX_STREAMED_CHUNK) {
      const end = Math.min(chunk.length, at + MAX_STREAMED_CHUNK);
      this.send(echo(direction, chunk.subarray(at, end), last && end === chunk.length));
    }
  }

  private onResponseHeaders(headers: HeaderValue[], end: boolean): void {
    if (this.phase !== 'picked' || this.responseStarted) return this.protocolError(GRPC_STATUS.FAILED_PRECONDITION, 'response_headers before the pick or twice');
    this.responseStarted = true;
    const rh = this.routeHeader;
    this.send(rh === null ? RESPONSE_HEADERS_CONTINUE : { response_headers: { response: { header_mutation: { set_headers: rh } } } });
    let status = 200;
    for (const h of headers) if (h.key === ':status') status = Number(headerValue(h)) || 200;
    const handler = this.handler;
    if (handler === null || this.done) return;
    this.lastAt = performance.now();
    handler.onStart(status);
    if (end) this.responseEnded();
  }

  private onResponseBody(chunk: Buffer | undefined, end: boolean): void {
    if (this.phase !== 'picked') return this.protocolError(GRPC_STATUS.FAILED_PRECONDITION, 'response_body before the pick');
    const body = chunk ?? EMPTY;
    this.echoSplit('response_body', body, end);
    const handler = this.handler;
    if (handler === null || this.done) return;
    // One clock read per chunk; the one timer checks it (re-arming a timer per chunk would cost more).
    this.lastAt = performance.now();
    if (body.length > 0) handler.onData(body);
    if (end) this.responseEnded();
  }

  private responseEnded(): void {
    const handler = this.handler;
    if (handler === null || this.done) return;
    this.finishCall();
    handler.onEnd();
  }

  /** The response phase went silent past its deadline: the attempt ends as a timeout (not a replica fault). */
  private readonly onTimer = (): void => {
    this.timer = null;
    if (this.done) return;
    const limit = this.responseStarted ? this.idleMs : this.deadlineMs;
    const left = limit - (performance.now() - this.lastAt);
    if (left > 0 && this.responseStarted) {
      this.timer = setTimeout(this.onTimer, left);
      return;
    }
    const handler = this.handler!;
    this.finishCall();
    handler.onError(this.responseStarted ? 'body_timeout' : 'headers_timeout', new Error('the response phase did not arrive in time'));
  };

  private finishCall(): void {
    this.done = true;
    if (this.timer !== null) {
      clearTimeout(this.timer);
      this.timer = null;
    }
  }

  /** Envoy ended or cancelled the stream. Before the response ended, that is the client gone: release at once. */
  private closedByEnvoy(cleanEnd: boolean): void {
    if (cleanEnd) this.endOurSide();
    if (this.aborted) return;
    this.aborted = true;
    this.phase = 'done';
    const cb = this.onAbort;
    this.onAbort = null;
    // A response that ended (or timed out) has settled its attempt already: nothing is left to release.
    if (cb === null || (this.handler !== null && this.done)) return;
    // The pipeline's abort: the request leaves the admission queue or its tokenizer task, and its attempt
    // (if dispatched) is aborted through abort() below, which releases the ledger and the router's feedback.
    cb();
  }

  private endOurSide(): void {
    if (this.ended) return;
    this.ended = true;
    this.stream.end();
  }

  private protocolError(code: number, details: string): void {
    if (this.ended) return;
    this.closedByEnvoy(false);
    this.ended = true;
    this.stream.emit('error', { code, details });
  }

  private reply(status: number, headers: HeaderList, body: string | Buffer, details: string): void {
    if (this.aborted) return;
    this.send(immediate(status, headers, body, details));
    this.phase = 'done';
    this.aborted = true;
    this.endOurSide();
  }

  // ---- UpstreamCall: the attempt's handle on the response phase ----
  pause(): void {}
  resume(): void {}
  abort(): void {
    const handler = this.handler;
    if (handler === null || this.done) return;
    this.finishCall();
    handler.onError('aborted', ABORTED);
  }

  // ---- ClientSink: the pipeline's answers before the pick ----
  begin(status: number, headers: HeaderList): void {
    if (this.started) return;
    this.status = status;
    // An unmetered request has no rate limits: the pipeline's x-ratelimit-* figures would be zeros.
    this.headers = isUnmetered(this.tenant) ? headers.filter((h) => !h[0].startsWith('x-ratelimit-')) : headers;
  }
  write(): boolean {
    return true;
  }
  end(chunk?: Uint8Array | string): void {
    if (this.started || this.status === 0) return;
    const body = chunk === undefined ? EMPTY : typeof chunk === 'string' ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.length);
    this.reply(this.status, this.headers, body, `expediter: ${this.status}`);
  }
  onDrain(): void {}
  setAbortHandler(cb: () => void): void {
    this.onAbort = cb;
  }
  cork(fn: () => void): void {
    fn();
  }
}

const EMPTY = Buffer.alloc(0);

function pathOnly(path: string): string {
  const q = path.indexOf('?');
  return q < 0 ? path : path.slice(0, q);
}
