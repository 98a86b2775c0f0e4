// One attempt at one replica, from dispatch to outcome: it opens the attempt's ledger entry and tells the
// router it dispatched, sends the request, relays a streaming response as it arrives (or collects a
// non-streaming one), reports the first token to the ledger and the router, and when the attempt ends
// releases the entry, tells the router it finished, and resolves with what happened (retry-policy.ts says
// what a failure means). Nothing reaches the client until the replica's first token (streams) or its whole
// body (non-streams), so every failure before that point can be retried elsewhere; after the first byte a
// failure ends the stream with one error event.
// A routing policy that learns finished replies (plan.replies) gets, with `finished`, the block hashes of a
// reply that ended with stop or length: the relay collects a stream's text (one string append per token
// event), a non-streaming body's text is read after it was sent, and the hashes are computed after the
// response ended (inline: before the next I/O event, so before the conversation's next turn can arrive).
// Not where the replica's KV events serve the router (Decision.engineReportsReply): its engine reports the
// reply's blocks itself, exactly, so the text is neither collected nor hashed.
// Thread: main. Hot path: onData per upstream chunk (one cork, one relay.push, two Atomics for the ledger).
import { errorBody } from '../errors/openai-error-body.ts';
import type { Rejection } from '../errors/rejection.ts';
import type { HeaderList } from '../relay/client-sink.ts';
import { SseRelay } from '../relay/sse-relay.ts';
import { ResponsesRelay } from '../relay/responses-relay.ts';
import type { StreamRelay } from '../relay/stream-relay.ts';
import { finishedReply, jsonBodyFigures, streamFigures } from './attempt-figures.ts';
import type { LedgerEntry } from '../registry/inflight-ledger.ts';
import { predictedCachedTokens } from '../router/cached-tokens.ts';
import type { Decision } from '../router/types.ts';
import { EMPTY_STREAM, FIRST_TOKEN_TIMEOUT, STALLED, statusFailure, TOO_LARGE, transportFailure, type AttemptOutcome } from '../upstream/retry-policy.ts';
import type { UpstreamFailureKind } from '../upstream/upstream-errors.ts';
import type { UpstreamCall, UpstreamHandler } from '../upstream/upstream-client.ts';
import type { RequestContext } from './request-context.ts';
import { normaliseUpstreamError } from './upstream-error-body.ts';
import type { Watched } from './stall-watch.ts';
import type { AttemptPlan } from './attempt-plan.ts';
import type { AttemptTrace } from '../tracing/request-trace.ts';

export type { AttemptPlan, ReplyHashing, StoredResponses } from './attempt-plan.ts';

/** Non-streaming bodies above this are refused rather than held in memory (a 131k-token completion is ~1 MB). */
const MAX_COLLECT_BYTES = 32 * 1024 * 1024;

/** The event that ends a stream still running when the shutdown grace period (server.shutdown_grace_ms) ran out. */
const CUT_BY_SHUTDOWN: Rejection = { code: 'shutting_down', message: 'The gateway is shutting down: the stream was cut at the end of its drain period.' };

export class UpstreamAttempt implements UpstreamHandler, Watched {
  private call: UpstreamCall | null = null;
  private status = 0;
  private chunks: Buffer[] = [];
  private collected = 0;
  private relay: StreamRelay | null = null;
  /** The first output token was seen (ledger, router and TTFT told); for chat, at the first event. */
  private firstToken = false;
  private storedDone = false;
  private relayedTokens = 0;
  private timer: NodeJS.Timeout | null = null;
  private timedOut = false;
  private stalled = false;
  stallSlot = -1;
  stallSince = 0;
  stallPrev: Watched | null = null;
  stallNext: Watched | null = null;
  private settled = false;
  /** Cached prompt tokens the replica reported for this attempt; null until (unless) it says. */
  private reportedCached: number | null = null;
  /** The text of a reply that finished with stop or length, when learnsReply; else null. */
  private reply: string | null = null;
  /** plan.replies wants this attempt's reply: set at dispatch, once the router says whether the engine reports it. */
  private learnsReply = false;
  private replyFinish: 'stop' | 'length' = 'stop';
  private readonly ctx: RequestContext;
  private readonly plan: AttemptPlan;
  private readonly decision: Decision;
  private readonly headers: HeaderList;
  private resolve: ((o: AttemptOutcome) => void) | null = null;
  /** Opened by run(), released exactly once by settle(). */
  private entry: LedgerEntry | null = null;
  private dispatchedAt = 0;
  /** Built on first use (a slow client), so a request that never meets backpressure never allocates it. */
  private onResume: (() => void) | null = null;
  /** The chunk being relayed, read by pushChunk inside cork: one function per stream, built at its second
   *  chunk (non-streaming attempts never need it), and no closure per chunk. */
  private chunk: Buffer | null = null;
  private pushChunk: (() => void) | null = null;
  /** This attempt's span (tracing on); its traceparent goes to the replica. */
  private trace: AttemptTrace | null = null;

  constructor(ctx: RequestContext, plan: AttemptPlan, decision: Decision, clientHeaders: HeaderList) {
    this.ctx = ctx;
    this.plan = plan;
    this.decision = decision;
    this.headers = clientHeaders;
  }

  /**
   * Dispatches to `url` and resolves with the outcome. The ledger entry opens here: the KV reservation
   * covers the whole prompt, its prefill work only the prompt less what the router predicts the replica
   * holds in its prefix cache.
   */
  run(url: string): Promise<AttemptOutcome> {
    return new Promise<AttemptOutcome>((resolve) => {
      this.resolve = resolve;
      const ctx = this.ctx;
      const plan = this.plan;
      const req = plan.routeReq;
      const d = this.decision;
      const uncached = req.promptTokens - d.cachedBlocks * plan.blockSize;
      ctx.predictedCachedTokens = predictedCachedTokens(d.cachedBlocks, req.promptTokens, plan.blockSize);
      this.entry = plan.ledger.dispatch(d.slot, req.promptTokens, plan.reservedOutputTokens, plan.blockSize, uncached > 0 ? uncached : 0, req.reply ?? null, plan.sequences ?? 1);
      plan.router.dispatched(req, d);
      this.learnsReply = plan.replies != null && !d.engineReportsReply;
      this.dispatchedAt = performance.now();
      ctx.phase = 'upstream_wait';
      if (ctx.stream) {
        // One timer per attempt; Node keeps equal-duration timers in one list, so arming is O(1).
        this.timer = setTimeout(() => {
          this.timer = null;
          this.timedOut = true;
          this.call?.abort();
        }, plan.firstTokenTimeoutMs);
      }
      const trace = ctx.trace === null ? null : (this.trace = ctx.trace.attempt(ctx.replicaId ?? '', url, ctx.retries + 1, d, ctx.predictedCachedTokens));
      let call: UpstreamCall;
      try {
        call = plan.upstream.dispatch(url, trace === null ? plan.request : trace.request(plan.request), this);
      } catch (err) {
        // Nothing was sent: give back what the dispatch took before the error reaches the pipeline.
        this.clearTimer();
        this.release();
        throw err;
      }
      this.call = call;
      // The client may fail the attempt synchronously (a closed pool): it has settled already.
      if (this.settled) return;
      ctx.call = call;
      if (ctx.cancelled) return call.abort();
      this.stallSlot = d.slot;
      this.stallSince = Date.now();
      plan.stalls?.watch(this);
    });
  }

  /** StallWatch: the replica showed no progress while this attempt waited; it is retried elsewhere. */
  onStall(): void {
    this.stalled = true;
    this.call?.abort();
  }

  onStart(status: number): void {
    this.status = status;
    // A whole answer is arriving (vLLM sends a non-streamed head with its body): no longer a stall candidate.
    if (!this.ctx.stream) this.plan.stalls?.unwatch(this);
  }

  /**
   * One cork of the client socket per upstream read (UpstreamHandler.batch): the SSE events a read carries
   * leave in one send() instead of one each. A replica that streams faster than we read (or a gateway that
   * fell behind under load) packs many events into one read: measured 302 send() per 300-token stream before,
   * 68-95 after, about one per read (`npm run bench -- syscalls`). Events are never held back: the cork ends
   * with the read.
   * The corks inside onData are then nested and run in place. A read that carries more than the cork buffer
   * holds is split by the sink (UwsSink keeps each cork within uWS's 16 KiB buffer and sends the rest in
   * further corks when this one ends), so a large read costs one send per 15 KiB.
   */
  batch(parse: () => void): void {
    if (this.ctx.stream) this.ctx.sink.cork(parse);
    else parse();
  }

  onData(chunk: Buffer): void {
    const ctx = this.ctx;
    if (this.status !== 200 || !ctx.stream) {
      this.collected += chunk.length;
      if (this.collected > MAX_COLLECT_BYTES) {
        this.call?.abort();
        return;
      }
      // The chunk is a view of the client's shared read buffer: keep a copy.
      const copy = Buffer.allocUnsafe(chunk.length);
      chunk.copy(copy);
      this.chunks.push(copy);
      return;
    }
    let relay = this.relay;
    const sink = ctx.sink;
    if (relay === null) {
      // First byte of the stream: from here on nothing is retried. For chat and completions vLLM sends
      // nothing before the first token, so this is also TTFT; a Responses stream opens with two events
      // sent before prefill, and its first token is its first output_text.delta (the relay says when).
      this.clearTimer();
      this.plan.stalls?.unwatch(this);
      ctx.phase = 'streaming';
      relay = this.relay = ctx.route === 'responses'
        ? new ResponsesRelay(sink, ctx.maxTokens)
        : new SseRelay(sink, !ctx.includeUsage, ctx.route === 'chat', this.learnsReply);
      sink.cork(() => {
        sink.begin(200, this.headers);
        this.push(relay!, chunk);
      });
    } else {
      this.chunk = chunk;
      sink.cork(this.pushChunk ??= () => {
        this.push(this.relay!, this.chunk!);
        this.chunk = null;
      });
    }
    if (!this.firstToken && relay.sawFirstToken) this.onFirstToken();
    if (relay.sawDone && this.plan.stored != null && relay instanceof ResponsesRelay) this.storedBy(relay.responseId, relay.figures?.outputTexts);
    const delta = relay.tokens - this.relayedTokens;
    if (delta > 0 && this.entry !== null) {
      this.relayedTokens = relay.tokens;
      this.plan.ledger.tokens(this.entry, delta);
      // A step of the replica just ended: the GPU-time model times the next one from here (one store).
      this.plan.router.tokens(this.decision);
    }
  }

  /** The first output token reached the client: TTFT, and the ledger's and the router's first-token feedback. */
  private onFirstToken(): void {
    this.firstToken = true;
    const now = performance.now();
    this.ctx.firstTokenAt = now;
    this.ctx.ttftMs = now - this.ctx.startedAt;
    if (this.entry !== null) this.plan.ledger.firstToken(this.entry);
    this.plan.router.firstToken(this.plan.routeReq, this.decision, now - this.dispatchedAt);
  }

  /**
   * The replica stored this response: remembered at once, before the client can read its end and send a
   * follow-up naming it. Once per attempt.
   */
  private storedBy(id: string | null | undefined, texts: string[] | undefined): void {
    const stored = this.plan.stored;
    if (stored == null || id == null || this.ctx.replicaId === null || this.storedDone) return;
    this.storedDone = true;
    stored.produced(this.ctx.replicaId, id, texts ?? []);
  }

  private push(relay: StreamRelay, chunk: Buffer): void {
    if (relay.push(chunk)) {
      // The client is slower than the replica: stop reading the replica's socket until the client drains,
      // so memory stays at one chunk per stream instead of growing with the stream.
      this.call?.pause();
      this.ctx.sink.onDrain(this.onResume ??= () => this.call?.resume());
    }
  }

  onEnd(): void {
    this.clearTimer();
    const ctx = this.ctx;
    ctx.upstreamMs += performance.now() - this.dispatchedAt;
    if (ctx.cancelled) return this.cancelled();
    if (this.status === 200 && ctx.stream) {
      const relay = this.relay;
      if (relay === null) return this.settle({ kind: 'retry', ...EMPTY_STREAM });
      this.takeStreamFigures(relay);
      ctx.status = 200;
      if (relay.upstreamError !== null) {
        ctx.code = 'upstream_error';
        ctx.sink.cork(() => relay.close());
        return this.settle({ kind: 'sent', failure: 'mid_stream' });
      }
      if (!relay.sawDone) {
        // The body ended cleanly at the HTTP level but the stream was cut short: never a fake [DONE].
        ctx.code = 'upstream_error';
        ctx.sink.cork(() => relay.fail({ code: 'upstream_error', message: 'The replica ended the stream before it was complete.' }));
        return this.settle({ kind: 'sent', failure: 'mid_stream' });
      }
      ctx.sink.cork(() => relay.close());
      this.keepReply(relay.replyText());
      return this.settle({ kind: 'sent', failure: null });
    }
    const body = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks);
    this.chunks = [];
    if (this.status === 200) {
      // The whole body is the first token a non-streaming attempt shows (not a TTFT the GPU-time model learns from).
      this.plan.router.firstToken(this.plan.routeReq, this.decision, performance.now() - this.dispatchedAt, false);
      ctx.status = 200;
      ctx.ttftMs = null;
      ctx.sink.cork(() => {
        ctx.sink.begin(200, this.headers);
        ctx.sink.end(body);
      });
      // After the send: the usage figures are for the record, not for the client, so reading them waits.
      const f = jsonBodyFigures(ctx, body, this.learnsReply);
      this.reportedCached = f.cached;
      this.storedBy(f.responseId, f.outputTexts);
      this.keepReply(f.reply);
      return this.settle({ kind: 'sent', failure: null });
    }
    const rejection = normaliseUpstreamError(this.status, body);
    const failure = statusFailure(this.status);
    if (failure === 'status_5xx') return this.settle({ kind: 'retry', failure, rejection });
    // A replica 4xx is the client's problem: pass it through (normalised), no retry.
    ctx.status = this.status;
    ctx.code = rejection.wireCode ?? rejection.code;
    const bodyText = errorBody(rejection);
    const headers = this.headers.filter((h) => h[0] !== 'content-type');
    ctx.sink.cork(() => {
      ctx.sink.begin(this.status, [['content-type', 'application/json'], ...headers]);
      ctx.sink.end(bodyText);
    });
    return this.settle({ kind: 'sent', failure });
  }

  onError(kind: UpstreamFailureKind, err: Error): void {
    this.clearTimer();
    const ctx = this.ctx;
    ctx.upstreamMs += performance.now() - this.dispatchedAt;
    if (ctx.cancelled) return this.cancelled();
    const relay = this.relay;
    if (relay !== null && relay.sawDone && relay.upstreamError === null) {
      // The stream was complete ([DONE] relayed) and only the socket's end failed: a clean finish.
      this.takeStreamFigures(relay);
      ctx.status = 200;
      ctx.sink.cork(() => relay.close());
      this.keepReply(relay.replyText());
      return this.settle({ kind: 'sent', failure: null });
    }
    if (relay !== null && ctx.shutdownAborted) {
      // The drain's deadline cut the stream, not the replica: one shutting_down event ends it, and it is
      // recorded as drained (status 503, code shutting_down) with the tokens relayed so far, no replica failure.
      this.takeStreamFigures(relay);
      ctx.status = 503;
      ctx.code = 'shutting_down';
      ctx.sink.cork(() => relay.fail(CUT_BY_SHUTDOWN));
      return this.settle({ kind: 'sent', failure: null });
    }
    if (relay !== null) {
      // Bytes already reached the client: no retry. One error event ends the stream.
      this.takeStreamFigures(relay);
      ctx.status = 200;
      ctx.code = 'upstream_error';
      ctx.sink.cork(() => relay.fail({ code: 'upstream_error', message: 'The replica connection failed mid-stream.' }));
      return this.settle({ kind: 'sent', failure: 'mid_stream' });
    }
    if (this.timedOut) return this.settle({ kind: 'retry', ...FIRST_TOKEN_TIMEOUT });
    if (this.stalled) return this.settle({ kind: 'retry', ...STALLED });
    if (this.collected > MAX_COLLECT_BYTES) return this.settle({ kind: 'retry', ...TOO_LARGE });
    return this.settle({ kind: 'retry', ...transportFailure(kind, err) });
  }

  /** The client left: keep what was relayed (billing counts it), then report the cancel. */
  private cancelled(): void {
    if (this.relay !== null) this.takeStreamFigures(this.relay);
    this.settle({ kind: 'cancelled' });
  }

  private takeStreamFigures(relay: StreamRelay): void {
    const cached = streamFigures(this.ctx, relay);
    if (cached !== null) this.reportedCached = cached;
  }

  /** Keeps a complete reply's text for its block hashes: only when the policy takes them and it ended with stop or length. */
  private keepReply(text: string | null): void {
    const finish = this.ctx.finishReason;
    if (!this.learnsReply || text === null || !finishedReply(finish)) return;
    this.reply = text;
    this.replyFinish = finish;
  }

  private clearTimer(): void {
    if (this.timer !== null) {
      clearTimeout(this.timer);
      this.timer = null;
    }
  }

  /** Gives back the attempt's ledger entry and closes its routing feedback: once, whatever ended it. */
  private release(): void {
    const entry = this.entry;
    if (entry === null) return;
    this.entry = null;
    this.plan.ledger.end(entry);
    const { router, routeReq, replies } = this.plan;
    const d = this.decision;
    router.ended(routeReq, d, entry.outputTokens);
    const cached = this.reportedCached;
    if (replies == null || this.reply === null) {
      // No reply to hash (not learnt, not finished, or the engine reports it): the policy hears the end alone.
      router.finished(routeReq, d, cached, null);
      return;
    }
    // The response has ended: hashing the reply is off the client's path. A failure (a worker that died)
    // costs only the index's knowledge of this reply.
    replies.hash(this.reply, this.replyFinish).then(
      (hashes) => router.finished(routeReq, d, cached, hashes),
      () => router.finished(routeReq, d, cached, null),
    );
    this.reply = null;
  }

  private settle(o: AttemptOutcome): void {
    if (this.settled) return;
    this.settled = true;
    this.trace?.end(o, this.status, this.reportedCached, this.ctx.firstTokenAt, this.relay !== null);
    this.plan.stalls?.unwatch(this);
    this.release();
    this.ctx.call = null;
    this.resolve!(o);
  }
}
