// The back half of a completion: admit (and route) → dispatch → outcome, once per attempt, and what the
// request's attempts share (UpstreamJob). handle-completion.ts drives the loop; admit.ts asks admission,
// which routes; each step here does one thing:
//   mayAttempt()   whether another attempt may start (or answers with the last failure)
//   accept()       records the replica an attempt was routed to; unroutable() answers when there is none
//   dispatch()     runs one UpstreamAttempt there: ledger entry, routing feedback, relay, outcome
//   afterAttempt() records the outcome (replica health, metrics, log) and says whether to try again;
//                  what a failure means is decided in src/upstream/retry-policy.ts.
// Thread: main. Hot path: once per attempt; nothing here runs per chunk.
import type { Rejection } from '../errors/rejection.ts';
import { exactForecast } from '../gpu-time/reply-length/reply-forecast.ts';
import type { HeaderList } from '../relay/client-sink.ts';
import type { RouteResult } from '../router/route.ts';
import type { RouteRequest } from '../router/types.ts';
import { errorMetricOf, isReplicaFault, mayRetry, type AttemptOutcome, type RetryableFailure } from '../upstream/retry-policy.ts';
import type { UpstreamRequest } from '../upstream/upstream-client.ts';
import type { PoolConfig } from '../config/schema.ts';
import { reply } from './finish-request.ts';
import { upstreamBody, type ParsedBody, type Route } from './parse-body.ts';
import type { RequestContext } from './request-context.ts';
import type { Services } from './services.ts';
import { UpstreamAttempt, type AttemptPlan, type ReplyHashing, type StoredResponses } from './upstream-attempt.ts';

export type Routed = Extract<RouteResult, { ok: true }>;
/** The tokenize stage's result: count, block hashes, and the ids after the last full block. */
export type TokenizedPrompt = Awaited<ReturnType<Services['tokenizer']['measure']>>;

const SSE_HEADERS: HeaderList = [['content-type', 'text/event-stream; charset=utf-8'], ['cache-control', 'no-cache'], ['x-accel-buffering', 'no']];
const JSON_HEADERS: HeaderList = [['content-type', 'application/json']];
const PATHS: Record<Route, string> = { chat: '/v1/chat/completions', completions: '/v1/completions', responses: '/v1/responses' };

/** What every attempt of one request sends, and what the attempts so far have learnt. One per request. */
export class UpstreamJob implements AttemptPlan, ReplyHashing, StoredResponses {
  readonly request: UpstreamRequest;
  readonly routeReq: RouteRequest;
  readonly reservedOutputTokens: number;
  readonly sequences: number;
  readonly blockSize: number;
  readonly firstTokenTimeoutMs: number;
  readonly ledger: AttemptPlan['ledger'];
  readonly router: AttemptPlan['router'];
  readonly upstream: AttemptPlan['upstream'];
  readonly stalls: AttemptPlan['stalls'];
  /** This job, when the routing policy learns finished replies and the tokenizer can hash them; else null. */
  readonly replies: ReplyHashing | null;
  /** This job when it is a Responses API request the replica stores (its id and turn are then remembered). */
  readonly stored: StoredResponses | null;
  readonly poolId: string;
  /** Response headers for the client (content type, request id, rate limits), before the route header. */
  readonly clientHeaders: HeaderList;
  /** The rate-limit headers alone, for an error answered after quota. */
  readonly limitHeaders: HeaderList;
  private readonly tokenizer: Services['tokenizer'];
  private readonly pool: PoolConfig;
  private readonly kind: 'chat' | 'completion';
  private readonly prompt: TokenizedPrompt;
  private readonly parsed: ParsedBody;
  private readonly owners: Services['responses'];
  private readonly tenant: string;
  /** Slots tried so far (the router skips them); the route request reads this array. */
  private readonly excluded: number[] = [];
  attempts = 0;
  /** The answer if no attempt succeeds: the last failure's. */
  last: Rejection | null = null;
  lastFailure: RetryableFailure | null = null;

  constructor(svc: Services, ctx: RequestContext, parsed: ParsedBody, target: { pool: PoolConfig; adapter: string | null },
    prompt: TokenizedPrompt, maxTokens: number, limitHeaders: HeaderList, pinned = -1) {
    const up = svc.cfg.upstream;
    const pool = target.pool;
    this.request = {
      path: PATHS[ctx.route],
      body: upstreamBody(parsed, target.adapter ?? pool.model, maxTokens),
      headers: { 'content-type': 'application/json', 'x-request-id': ctx.id },
      headersTimeoutMs: parsed.stream ? up.first_token_timeout_ms + 1000 : up.request_timeout_ms,
      bodyTimeoutMs: parsed.stream ? up.first_token_timeout_ms + 60000 : up.request_timeout_ms,
    };
    // The reply's length as the pool's finished streams predict it (max_tokens only bounds it), unless the
    // client said it: vLLM's ignore_eos with a max_tokens sent runs the reply to that cap (a stop string can
    // still end it sooner, so the cap stays an upper bound, as everywhere).
    const reply = parsed.maxTokens !== null && parsed.raw['ignore_eos'] === true ? exactForecast(maxTokens)
      : svc.replyLengths?.forecast(pool.id, ctx.route, ctx.tenant?.name ?? null, prompt.promptTokens, maxTokens, parsed.maxTokens !== null);
    this.routeReq = { poolId: pool.id, adapter: target.adapter, promptTokens: prompt.promptTokens, maxTokens, reply, blockHashes: prompt.blockHashes, excluded: this.excluded };
    ctx.replyForecast = reply ?? null;
    ctx.sequences = parsed.n;
    this.sequences = parsed.n;
    if (pinned >= 0) this.routeReq.pinned = pinned;
    this.reservedOutputTokens = maxTokens * parsed.n;
    this.blockSize = pool.block_size;
    this.firstTokenTimeoutMs = up.first_token_timeout_ms;
    this.ledger = svc.registry.ledger;
    this.router = svc.router;
    this.upstream = svc.upstream;
    this.stalls = svc.stalls ?? null;
    // Plain reads of what setup fixed: a policy with a `finished` hook (kv-aware) extends its prefix index
    // with the reply's blocks; round-robin has none, so its requests collect no text and hash nothing. With
    // n > 1 the stream interleaves several replies: none is learnt.
    this.replies = svc.router.policy.finished !== undefined && svc.tokenizer.replyHashes !== undefined && prompt.tailTokens !== undefined && parsed.n === 1 ? this : null;
    this.tokenizer = svc.tokenizer;
    this.pool = pool;
    this.kind = ctx.route === 'completions' ? 'completion' : 'chat';
    this.parsed = parsed;
    this.owners = svc.responses;
    this.tenant = ctx.tenant?.name ?? '';
    this.stored = parsed.responses?.store === true ? this : null;
    this.prompt = prompt;
    this.poolId = pool.id;
    this.clientHeaders = [...(parsed.stream ? SSE_HEADERS : JSON_HEADERS), ['x-request-id', ctx.id], ...limitHeaders];
    this.limitHeaders = limitHeaders;
  }

  /** StoredResponses: the replica stored response `id`; a follow-up naming it is sent there. */
  produced(replicaId: string, id: string, outputTexts: string[]): void {
    this.owners.remember(id, this.tenant, this.poolId, replicaId, { messages: this.parsed.messages!, outputTexts });
  }

  tried(slot: number): void {
    this.excluded.push(slot);
  }

  /** ReplyHashing: the reply's blocks after this request's prompt, on this request's pool and adapter. */
  hash(text: string, finishReason: 'stop' | 'length'): Promise<Float64Array> {
    return this.tokenizer.replyHashes!({
      pool: this.pool, kind: this.kind, adapter: this.routeReq.adapter, prompt: this.prompt as Required<TokenizedPrompt>, replyText: text, finishReason,
    });
  }
}

/** Whether another attempt may start; when not, answers with the last failure's error. */
export function mayAttempt(svc: Services, ctx: RequestContext, job: UpstreamJob): boolean {
  if (mayRetry(job.attempts, svc.cfg.upstream.max_attempts)) return true;
  reply(ctx, job.last ?? { code: 'upstream_unavailable' }, job.limitHeaders);
  return false;
}

/** Answers a request the router found no replica for: no healthy one (503 with Retry-After), or none left to try. */
export function unroutable(svc: Services, ctx: RequestContext, job: UpstreamJob, reason: 'no_healthy_replica' | 'all_tried'): void {
  if (reason === 'no_healthy_replica' && job.last === null) {
    reply(ctx, { code: 'no_healthy_replica', retryAfterSeconds: retryAfterForDownFleet(svc) }, job.limitHeaders);
  } else {
    reply(ctx, job.last ?? { code: 'upstream_unavailable' }, job.limitHeaders);
  }
}

/** Records the replica admission routed this attempt to (retries, tried slots, the request's replica, metrics). */
export function accept(svc: Services, ctx: RequestContext, job: UpstreamJob, routed: Routed): void {
  if (job.attempts > 0) {
    ctx.retries++;
    svc.metrics?.retry(job.poolId, job.lastFailure!);
  }
  job.attempts++;
  job.tried(routed.slot);
  ctx.slot = routed.slot;
  ctx.replicaId = routed.replicaId;
  svc.metrics?.routed(svc.router.policy.name, routed.replicaId, routed.decision.why);
}

/** Runs one attempt on the routed replica; resolves when it has answered the client or failed before that. */
export function dispatch(svc: Services, ctx: RequestContext, job: UpstreamJob, routed: Routed): Promise<AttemptOutcome> {
  const headers = svc.cfg.expose_route_header
    ? [...job.clientHeaders, ['x-gateway-route', svc.router.header(job.routeReq, routed.decision)] as const]
    : job.clientHeaders;
  return new UpstreamAttempt(ctx, job, routed.decision, headers).run(svc.registry.replica(routed.slot).url);
}

/** Records how the attempt went; true when another attempt should follow (route() may still find none). */
export function afterAttempt(svc: Services, ctx: RequestContext, job: UpstreamJob, routed: Routed, outcome: AttemptOutcome): boolean {
  switch (outcome.kind) {
    case 'sent':
      svc.registry.reportDataPlaneSuccess(routed.slot);
      if (outcome.failure !== null) svc.metrics?.upstreamError(errorMetricOf(outcome.failure));
      return false;
    case 'cancelled':
      return false;
    case 'retry': {
      // Shutdown aborted the attempt: the failure is ours, not the replica's.
      if (ctx.shutdownAborted) {
        reply(ctx, { code: 'shutting_down', retryAfterSeconds: 1 }, job.limitHeaders);
        return false;
      }
      const f = outcome.failure;
      job.last = outcome.rejection;
      job.lastFailure = f;
      svc.metrics?.upstreamError(errorMetricOf(f));
      if (isReplicaFault(f)) svc.registry.reportDataPlaneFailure(routed.slot);
      svc.log.warn({ request_id: ctx.id, replica: routed.replicaId, failure: f, attempt: job.attempts }, 'upstream attempt failed before the first byte');
      return !ctx.cancelled;
    }
  }
}

/** A down replica is probed every scrape interval and comes back after one good scrape. */
function retryAfterForDownFleet(svc: Services): number {
  return Math.max(1, Math.ceil(svc.cfg.registry.scrape_interval_ms * svc.cfg.registry.down_after_failures / 1000));
}
