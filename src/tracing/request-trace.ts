// One request's trace: the root span (SERVER, the client's traceparent as its parent), one child span per stage
// (tokenize, quota, admit: its length is the queue wait), one CLIENT span per upstream attempt (the replica's
// request carries its traceparent) with a `relay` child from the first token to the end of a stream. GenAI
// semantic-convention attributes on the root, the gateway's decision figures under `expediter.`.
// Built only when tracing is on (RequestTracing.begin); the pipeline holds it in ctx.trace, null when off,
// so an untraced request pays one null check per hook.
// Thread: the request's acceptor thread. Per request when on: 5-6 spans, their attributes set once each.
import type { AdmissionOutcome } from '../admission/types.ts';
import type { Decision } from '../router/types.ts';
import type { AttemptOutcome } from '../upstream/retry-policy.ts';
import type { UpstreamRequest } from '../upstream/upstream-client.ts';
import { SpanKind, type SpanHandle, type Tracer } from './tracer.ts';

/** What the root span reads from the request when it ends (RequestContext has these fields). */
export interface RequestFigures {
  readonly id: string;
  readonly route: 'chat' | 'completions' | 'responses';
  readonly tenant: { readonly name: string } | null;
  readonly model: string;
  readonly poolId: string | null;
  readonly replicaId: string | null;
  readonly stream: boolean;
  readonly status: number;
  readonly code: string | null;
  readonly finishReason: string | null;
  readonly maxTokens: number;
  readonly inputTokens: number;
  readonly outputTokens: number;
  readonly cachedTokens: number;
  readonly predictedCachedTokens: number;
  readonly ttftMs: number | null;
  readonly firstTokenAt: number;
  readonly queueMs: number;
  readonly retries: number;
  readonly cancelled: boolean;
}

/** What the trace needs from its thread: the tracer and the figures fixed for the thread. */
export interface TraceScope {
  readonly tracer: Tracer;
  readonly threadId: number;
}

const HTTP_ROUTE = { chat: '/v1/chat/completions', completions: '/v1/completions', responses: '/v1/responses' } as const;
/** gen_ai.operation.name: the Responses API is a chat in the GenAI conventions' terms. */
const OPERATION = { chat: 'chat', completions: 'text_completion', responses: 'chat' } as const;

export class RequestTrace {
  readonly root: SpanHandle;
  private readonly scope: TraceScope;
  private readonly policy: string;
  /** The stage span open now (tokenize, quota, admit), ended by the next done() or by the request's end. */
  private stageSpan: SpanHandle | null = null;
  private shedReason: string | null = null;

  constructor(scope: TraceScope, route: RequestFigures['route'], policy: string, startedAt: number, traceparent: string, tracestate: string) {
    this.scope = scope;
    this.policy = policy;
    this.root = scope.tracer.root(OPERATION[route], SpanKind.server, startedAt, traceparent, tracestate);
  }

  /** A stage begins now (the open one, if any, ends). */
  stage(name: 'tokenize' | 'quota' | 'admit'): void {
    // A trace the sampler dropped gets no child spans: nothing of them would be exported.
    if (!this.root.recording) return;
    this.done('');
    this.stageSpan = this.scope.tracer.child(this.root, name, SpanKind.internal, performance.now());
  }

  /** The open stage ended; `result` ('' for none) is its expediter.result (the quota's ok or refusal code). */
  done(result: string): void {
    const s = this.stageSpan;
    if (s === null) return;
    this.stageSpan = null;
    if (result !== '' && s.recording) s.set('expediter.result', result);
    s.end(performance.now());
  }

  /** Admission answered the open `admit` stage: routed (after a wait in its queue, or none), shed, or nothing to route to. */
  admitted(o: AdmissionOutcome): void {
    const s = this.stageSpan;
    if (s !== null && s.recording) {
      s.set('expediter.queue_ms', o.queuedMs);
      s.set('expediter.result', o.kind);
      if (o.kind === 'admitted') s.set('expediter.replica', o.replicaId);
      else if (o.kind === 'unroutable') s.set('error.type', o.reason);
      else if (o.kind === 'rejected') s.set('error.type', o.rejection.code);
    }
    if (o.kind === 'rejected' && o.shed !== null) {
      this.shedReason = o.shed;
      if (s !== null && s.recording) s.set('expediter.shed_reason', o.shed);
    }
    this.done('');
  }

  /** The attempt just dispatched to `replica` at `url` (the attempt numbered `attempt`, from 1). */
  attempt(replica: string, url: string, attempt: number, d: Decision, predictedCachedTokens: number): AttemptTrace {
    // Dropped by the sampler: the replica's traceparent names the root (its flags say not sampled).
    if (!this.root.recording) return new AttemptTrace(this.scope.tracer, this.root, url);
    const span = this.scope.tracer.child(this.root, 'upstream attempt', SpanKind.client, performance.now());
    if (span.recording) {
      span.set('expediter.attempt', attempt);
      span.set('expediter.replica', replica);
      span.set('expediter.policy', this.policy);
      span.set('expediter.route_why', d.why);
      span.set('expediter.cached_blocks.predicted', d.cachedBlocks);
      span.set('expediter.prompt_blocks', d.promptBlocks);
      span.set('expediter.cached_tokens.predicted', predictedCachedTokens);
      if (!Number.isNaN(d.predictedTtftMs)) span.set('expediter.predicted_ttft_ms', d.predictedTtftMs);
      if (!Number.isNaN(d.gpuTtftMs)) span.set('expediter.gpu.predicted_ttft_ms', d.gpuTtftMs);
      if (!Number.isNaN(d.kvAfter)) span.set('expediter.kv_after', d.kvAfter);
    }
    return new AttemptTrace(this.scope.tracer, span, url);
  }

  /** The request ended (finishRequest): the root span takes the request's figures and ends. */
  end(r: RequestFigures): void {
    const now = performance.now();
    const open = this.stageSpan;
    if (open !== null && r.code !== null && open.recording) open.set('error.type', r.code);
    this.done('');
    const root = this.root;
    if (!root.recording) return root.end(now);
    const op = OPERATION[r.route];
    if (r.model !== '') {
      root.rename(`${op} ${r.model}`);
      root.set('gen_ai.request.model', r.model);
    }
    root.set('gen_ai.operation.name', op);
    root.set('http.request.method', 'POST');
    root.set('http.route', HTTP_ROUTE[r.route]);
    root.set('http.response.status_code', r.status);
    root.set('expediter.request_id', r.id);
    root.set('expediter.policy', this.policy);
    root.set('thread.id', this.scope.threadId);
    if (r.tenant !== null) root.set('expediter.tenant', r.tenant.name);
    if (r.poolId !== null) root.set('expediter.pool', r.poolId);
    if (r.maxTokens > 0) root.set('gen_ai.request.max_tokens', r.maxTokens);
    if (r.model !== '') root.set('gen_ai.request.stream', r.stream);
    if (r.inputTokens > 0) root.set('gen_ai.usage.input_tokens', r.inputTokens);
    if (r.replicaId !== null) {
      root.set('expediter.replica', r.replicaId);
      root.set('gen_ai.usage.output_tokens', r.outputTokens);
      root.set('gen_ai.usage.cache_read.input_tokens', r.cachedTokens);
      root.set('expediter.cached_tokens.reported', r.cachedTokens);
      root.set('expediter.cached_tokens.predicted', r.predictedCachedTokens);
      root.set('expediter.retries', r.retries);
      root.set('expediter.queue_ms', r.queueMs);
    }
    if (r.finishReason !== null) root.set('gen_ai.response.finish_reasons', [r.finishReason]);
    if (r.ttftMs !== null) {
      root.set('gen_ai.response.time_to_first_chunk', r.ttftMs / 1000);
      root.set('expediter.ttft_ms', r.ttftMs);
    }
    if (this.shedReason !== null) root.set('expediter.shed_reason', this.shedReason);
    if (r.cancelled) root.set('expediter.cancelled', true);
    if (r.code !== null) root.set('error.type', r.code);
    // A server span's 4xx is the client's (OpenTelemetry's HTTP conventions): status ERROR for the gateway's
    // and the fleet's failures only, a stream cut after its 200 included; error.type names every refusal.
    if (r.status >= 500 || (r.status === 200 && r.code !== null)) root.fail(r.code ?? `HTTP ${r.status}`);
    root.end(now);
  }
}

/** One upstream attempt's span (CLIENT): the replica request's traceparent names it. */
export class AttemptTrace {
  private readonly tracer: Tracer;
  private readonly span: SpanHandle;
  private readonly startedAt: number;
  private readonly url: string;

  constructor(tracer: Tracer, span: SpanHandle, url: string) {
    this.tracer = tracer;
    this.span = span;
    this.url = url;
    this.startedAt = performance.now();
  }

  /** The attempt's request with `traceparent` (and `tracestate`) naming this span: a copy, the job's is shared. */
  request(req: UpstreamRequest): UpstreamRequest {
    if (this.span.recording) {
      this.span.set('http.request.method', req.method ?? 'POST');
      this.span.set('url.full', this.url + req.path);
    }
    const state = this.span.tracestate;
    const headers = state === ''
      ? { ...req.headers, traceparent: this.span.traceparent }
      : { ...req.headers, traceparent: this.span.traceparent, tracestate: state };
    return { ...req, headers };
  }

  /**
   * The attempt settled. `firstTokenAt` (performance.now() ms, 0 before any) marks the first token relayed by
   * this attempt when it is later than its start: the `relay` child runs from there to the end of a stream.
   */
  end(o: AttemptOutcome, status: number, reportedCached: number | null, firstTokenAt: number, streamed: boolean): void {
    const span = this.span;
    // Not recording: nothing to end (for a dropped trace this is the root itself, ended with the request).
    if (!span.recording) return;
    const now = performance.now();
    if (status > 0) span.set('http.response.status_code', status);
    if (reportedCached !== null) span.set('expediter.cached_tokens.reported', reportedCached);
    const first = firstTokenAt >= this.startedAt ? firstTokenAt : 0;
    if (first > 0) {
      span.event('first_token', first, { 'expediter.ttft_from_dispatch_ms': first - this.startedAt });
      if (streamed) this.tracer.child(span, 'relay', SpanKind.internal, first).end(now);
    }
    if (o.kind === 'retry') {
      span.set('error.type', o.failure);
      span.fail(o.failure);
    } else if (o.kind === 'cancelled') {
      span.set('error.type', 'cancelled');
    } else if (o.failure !== null) {
      // A replica's 4xx too: a client span's 4xx is an error (OpenTelemetry's HTTP conventions).
      span.set('error.type', o.failure);
      span.fail(o.failure);
    }
    span.end(now);
  }
}
