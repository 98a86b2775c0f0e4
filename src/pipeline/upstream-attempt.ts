// One attempt at one replica: relays a streaming response as it arrives, or collects a non-streaming one, and
// decides what a failure means. Nothing reaches the client until the replica's first token (streams) or its
// whole body (non-streams), so every failure before that point can be retried elsewhere; after the first
// byte a failure ends the stream with one error event. Resolves with what happened.
// Thread: main. Hot path: onData per upstream chunk (one cork, one relay.push, two Atomics for the ledger).
import { errorBody } from '../errors/openai-error-body.ts';
import type { Rejection } from '../errors/gateway-error.ts';
import type { HeaderList } from '../relay/client-sink.ts';
import { SseRelay } from '../relay/sse-relay.ts';
import { jsonFigures } from '../relay/json-figures.ts';
import type { UpstreamFailureKind } from '../upstream/upstream-errors.ts';
import type { UpstreamCall, UpstreamHandler } from '../upstream/upstream-client.ts';
import type { InflightLedger } from '../registry/inflight-ledger.ts';
import type { RequestContext } from './request-context.ts';
import { normaliseUpstreamError } from './upstream-error-body.ts';

export type RetryKind = 'connect' | 'reset' | 'status_5xx' | 'first_token_timeout' | 'headers_timeout' | 'empty_response' | 'other';

export type AttemptOutcome =
  /** Answered: a stream (ended cleanly or by an error event after the first byte) or a body. */
  | { kind: 'sent'; failure: 'mid_stream' | 'status_4xx' | null }
  | { kind: 'retry'; failure: RetryKind; rejection: Rejection }
  | { kind: 'cancelled' };

/** Non-streaming bodies above this are refused rather than held in memory (a 131k-token completion is ~1 MB). */
const MAX_COLLECT_BYTES = 32 * 1024 * 1024;

export class UpstreamAttempt implements UpstreamHandler {
  call: UpstreamCall | null = null;
  private status = 0;
  private chunks: Buffer[] = [];
  private collected = 0;
  private relay: SseRelay | null = null;
  private relayedTokens = 0;
  private timer: NodeJS.Timeout | null = null;
  private timedOut = false;
  private settled = false;
  private readonly ctx: RequestContext;
  private readonly ledger: InflightLedger;
  private readonly headers: HeaderList;
  private readonly resolve: (o: AttemptOutcome) => void;
  private readonly dispatchedAt: number;
  /** Built on first use (a slow client), so a request that never meets backpressure never allocates it. */
  private onResume: (() => void) | null = null;
  /** The chunk being relayed, read by pushChunk inside cork: one function per stream, built at its second
   *  chunk (non-streaming attempts never need it), and no closure per chunk. */
  private chunk: Buffer | null = null;
  private pushChunk: (() => void) | null = null;

  constructor(ctx: RequestContext, ledger: InflightLedger, clientHeaders: HeaderList, firstTokenTimeoutMs: number, resolve: (o: AttemptOutcome) => void) {
    this.ctx = ctx;
    this.ledger = ledger;
    this.headers = clientHeaders;
    this.resolve = resolve;
    this.dispatchedAt = performance.now();
    if (ctx.stream) {
      // One timer per attempt; Node keeps equal-duration timers in one list, so arming is O(1).
      this.timer = setTimeout(() => {
        this.timer = null;
        this.timedOut = true;
        this.call?.abort();
      }, firstTokenTimeoutMs);
    }
  }

  onStart(status: number): void {
    this.status = status;
  }

  /**
   * One cork of the client socket per upstream read (UpstreamHandler.batch): the SSE events a read carries
   * leave in one send() instead of one each. A replica that streams faster than we read (or a gateway that
   * fell behind under load) packs many events into one read: measured 302 send() per 300-token stream before,
   * 68-95 after, about one per read (`npm run bench -- syscalls`). Events are never held back: the cork ends
   * with the read.
   * The corks inside onData are then nested, and uWS runs nested corks in place. They are not redundant:
   * when a read carries more than uWS's 16 KiB cork buffer, uWS sends it and leaves the socket uncorked, and
   * the next event's cork corks it again. Writing straight through inside the outer cork measured 229 sends
   * per 300-token stream instead of 68-95, and 1.27x the CPU.
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
      // First byte of the stream: vLLM sends nothing before the first token, so this is TTFT.
      this.clearTimer();
      ctx.firstTokenAt = performance.now();
      ctx.ttftMs = ctx.firstTokenAt - ctx.startedAt;
      ctx.phase = 'streaming';
      if (ctx.ledgerEntry !== null) this.ledger.firstToken(ctx.ledgerEntry);
      relay = this.relay = new SseRelay(sink, !this.wantsUsage(), ctx.route === 'chat');
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
    const delta = relay.tokens - this.relayedTokens;
    if (delta > 0 && ctx.ledgerEntry !== null) {
      this.relayedTokens = relay.tokens;
      this.ledger.tokens(ctx.ledgerEntry, delta);
    }
  }

  private push(relay: SseRelay, chunk: Buffer): void {
    if (relay.push(chunk)) {
      // The client is slower than the replica: stop reading the replica's socket until the client drains,
      // so memory stays at one chunk per stream instead of growing with the stream.
      this.call?.pause();
      this.ctx.sink.onDrain(this.onResume ??= () => this.call?.resume());
    }
  }

  private wantsUsage(): boolean {
    return this.ctx.includeUsage;
  }

  onEnd(): void {
    this.clearTimer();
    const ctx = this.ctx;
    ctx.upstreamMs += performance.now() - this.dispatchedAt;
    if (ctx.cancelled) return this.cancelled();
    if (this.status === 200 && ctx.stream) {
      const relay = this.relay;
      if (relay === null) {
        return this.finish({ kind: 'retry', failure: 'empty_response', rejection: { code: 'upstream_unavailable', message: 'The replica ended the stream without a token.' } });
      }
      this.takeStreamFigures(relay);
      let failure: 'mid_stream' | null = null;
      if (relay.upstreamError !== null) {
        ctx.code = 'upstream_error';
        failure = 'mid_stream';
        ctx.sink.cork(() => relay.close());
      } else if (!relay.sawDone) {
        // The body ended cleanly at the HTTP level but the stream was cut short: never a fake [DONE].
        ctx.code = 'upstream_error';
        failure = 'mid_stream';
        ctx.sink.cork(() => relay.fail({ code: 'upstream_error', message: 'The replica ended the stream before it was complete.' }));
      } else {
        ctx.sink.cork(() => relay.close());
      }
      ctx.status = 200;
      return this.finish({ kind: 'sent', failure });
    }
    const body = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks);
    this.chunks = [];
    if (this.status === 200) {
      ctx.status = 200;
      ctx.ttftMs = null;
      ctx.sink.cork(() => {
        ctx.sink.begin(200, this.headers);
        ctx.sink.end(body);
      });
      // After the send: the usage figures are for the record, not for the client, so reading them waits.
      this.takeJsonFigures(body);
      return this.finish({ kind: 'sent', failure: null });
    }
    const rejection = normaliseUpstreamError(this.status, body);
    if (this.status >= 500) return this.finish({ kind: 'retry', failure: 'status_5xx', rejection });
    // A replica 4xx is the client's problem: pass it through (normalised), no retry.
    ctx.status = this.status;
    ctx.code = rejection.wireCode ?? rejection.code;
    const bodyText = errorBody(rejection);
    const headers = this.headers.filter((h) => h[0] !== 'content-type');
    ctx.sink.cork(() => {
      ctx.sink.begin(this.status, [['content-type', 'application/json'], ...headers]);
      ctx.sink.end(bodyText);
    });
    return this.finish({ kind: 'sent', failure: 'status_4xx' });
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
      return this.finish({ kind: 'sent', failure: null });
    }
    if (relay !== null) {
      // Bytes already reached the client: no retry. One error event ends the stream.
      this.takeStreamFigures(relay);
      ctx.status = 200;
      ctx.code = 'upstream_error';
      ctx.sink.cork(() => relay.fail({ code: 'upstream_error', message: 'The replica connection failed mid-stream.' }));
      return this.finish({ kind: 'sent', failure: 'mid_stream' });
    }
    if (this.timedOut) {
      return this.finish({ kind: 'retry', failure: 'first_token_timeout', rejection: { code: 'upstream_timeout' } });
    }
    if (this.collected > MAX_COLLECT_BYTES) {
      return this.finish({ kind: 'retry', failure: 'other', rejection: { code: 'upstream_error', message: 'The replica response was too large.' } });
    }
    const failure: RetryKind = kind === 'connect' ? 'connect' : kind === 'reset' ? 'reset' : kind === 'headers_timeout' ? 'headers_timeout' : 'other';
    const rejection: Rejection = kind === 'headers_timeout'
      ? { code: 'upstream_timeout' }
      : { code: 'upstream_unavailable', message: `The replica could not be reached (${(err as { code?: string }).code ?? err.message}).` };
    return this.finish({ kind: 'retry', failure, rejection });
  }

  /** The client left: keep what was relayed (billing counts it), then report the cancel. */
  private cancelled(): void {
    if (this.relay !== null) this.takeStreamFigures(this.relay);
    this.finish({ kind: 'cancelled' });
  }

  private takeStreamFigures(relay: SseRelay): void {
    const ctx = this.ctx;
    ctx.finishReason = relay.finishReason;
    if (relay.usage !== null) {
      ctx.outputTokens = relay.usage.completionTokens;
      ctx.cachedTokens = relay.usage.cachedTokens;
      if (relay.usage.promptTokens > 0) ctx.inputTokens = relay.usage.promptTokens;
    } else {
      ctx.outputTokens = relay.tokens;
    }
  }

  private takeJsonFigures(body: Buffer): void {
    const f = jsonFigures(body);
    // A body we cannot read is still passed through; billing keeps the gateway's own prompt count.
    if (f === null) return;
    const ctx = this.ctx;
    ctx.outputTokens = f.completionTokens;
    ctx.cachedTokens = f.cachedTokens;
    if (f.promptTokens > 0) ctx.inputTokens = f.promptTokens;
    ctx.finishReason = f.finishReason;
  }

  private clearTimer(): void {
    if (this.timer !== null) {
      clearTimeout(this.timer);
      this.timer = null;
    }
  }

  private finish(o: AttemptOutcome): void {
    if (this.settled) return;
    this.settled = true;
    this.resolve(o);
  }
}
