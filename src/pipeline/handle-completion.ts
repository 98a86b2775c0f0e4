// THE life of a completion request, in order:
//   auth → read body → validate → resolve model → tokenize (count + block hashes) → context check →
//   quota (reserve prompt + max_tokens, take a lease) → route → upstream attempt (retry before the first
//   byte only) → relay → settle quota exactly once → usage record, metrics, one log line.
// Expected rejections are values (Rejection), answered with pre-serialised bodies; exceptions are bugs.
// Thread: main. Hot path: everything here runs per request; the only awaits are body, tokenize, quota and
// the upstream attempt.
import type { Rejection } from '../errors/gateway-error.ts';
import { errorEvent } from '../errors/openai-error-body.ts';
import type { ClientSink, HeaderList } from '../relay/client-sink.ts';
import type { QuotaDecision } from '../quota/types.ts';
import { parseBody, upstreamBody, type ParsedBody, type Route } from './parse-body.ts';
import { RequestContext } from './request-context.ts';
import type { Services, TenantIdentity } from './services.ts';
import { UpstreamAttempt, type AttemptOutcome } from './upstream-attempt.ts';
import { finishRequest, reply } from './finish-request.ts';
import { requestIdFor } from './request-id.ts';

export interface IncomingCompletion {
  route: Route;
  /** Authenticated from the Authorization header before the body is read (src/server/app.ts). */
  tenant: TenantIdentity;
  /** Resolves with the body, or null when the client went away or the body was over the limit (already answered). */
  body: Promise<Buffer | null>;
}

const SSE_HEADERS: HeaderList = [['content-type', 'text/event-stream; charset=utf-8'], ['cache-control', 'no-cache'], ['x-accel-buffering', 'no']];
const JSON_HEADERS: HeaderList = [['content-type', 'application/json']];
const PATHS: Record<Route, string> = { chat: '/v1/chat/completions', completions: '/v1/completions' };

export function newContext(route: Route, sink: ClientSink, requestId: string | undefined): RequestContext {
  return new RequestContext(requestIdFor(requestId), route, sink, performance.now());
}

export async function handleCompletion(svc: Services, ctx: RequestContext, req: IncomingCompletion): Promise<void> {
  ctx.sink.setAbortHandler(() => onClientAbort(svc, ctx));
  try {
    await run(svc, ctx, req);
  } catch (err) {
    svc.log.error({ err, request_id: ctx.id }, 'request failed with an internal error');
    if (!ctx.sink.started) reply(ctx, { code: 'internal_error' }, []);
    else ctx.sink.cork(() => ctx.sink.end(errorEvent({ code: 'internal_error' })));
    ctx.status = ctx.sink.started && ctx.status === 200 ? 200 : 500;
    ctx.code = 'internal_error';
  } finally {
    await finishRequest(svc, ctx);
  }
}

function onClientAbort(svc: Services, ctx: RequestContext): void {
  if (ctx.finished || ctx.cancelled) return;
  ctx.cancelled = true;
  ctx.cancelledAt = performance.now();
  ctx.abortSignal();
  const call = ctx.call;
  if (call !== null) call.abort();
  svc.metrics?.cancelled(ctx.phase, (performance.now() - ctx.cancelledAt) / 1000);
}

async function run(svc: Services, ctx: RequestContext, req: IncomingCompletion): Promise<void> {
  const tenant = req.tenant;
  ctx.tenant = tenant;

  const bytes = await req.body;
  if (bytes === null || ctx.cancelled) {
    if (!ctx.cancelled) ctx.status = 413;
    return;
  }
  const parsed = parseBody(ctx.route, bytes);
  if ('code' in parsed) return reply(ctx, parsed, []);
  ctx.model = parsed.model;
  ctx.stream = parsed.stream;
  ctx.includeUsage = parsed.includeUsage;

  const target = svc.catalog.resolve(parsed.model);
  if (target === undefined) {
    return reply(ctx, { code: 'model_not_found', param: 'model', message: `The model \`${parsed.model}\` does not exist.` }, []);
  }
  const pool = target.pool;
  ctx.poolId = pool.id;
  ctx.adapter = target.adapter;
  if (tenant.allowedModels.length > 0 && !tenant.allowedModels.includes(pool.id) && !tenant.allowedModels.includes(parsed.model)) {
    return reply(ctx, { code: 'model_not_allowed', param: 'model' }, []);
  }

  let tokens: { promptTokens: number; blockHashes: Float64Array };
  try {
    tokens = await svc.tokenizer.tokenize(
      parsed.messages !== null
        ? { pool, kind: 'chat', messages: parsed.messages, tools: parsed.tools, adapter: target.adapter }
        : { pool, kind: 'completion', prompt: parsed.prompt!, adapter: target.adapter },
      // Prompts up to the inline cut-off take well under a millisecond to tokenize: nothing worth cancelling,
      // so no signal (and no AbortController) is built for them.
      promptChars(parsed) > svc.cfg.tokenizer.inline_max_chars ? ctx.signal() : undefined,
    );
  } catch (err) {
    if (ctx.cancelled) return;
    if (ctx.shutdownAborted) return reply(ctx, { code: 'shutting_down', retryAfterSeconds: 1 }, []);
    if ((err as Error).name !== 'ChatTemplateError') throw err;
    return reply(ctx, { code: 'invalid_value', param: parsed.messages !== null ? 'messages' : 'prompt', message: `The prompt could not be tokenized: ${(err as Error).message}` }, []);
  }
  if (ctx.cancelled) return;
  if (ctx.shutdownAborted) return reply(ctx, { code: 'shutting_down', retryAfterSeconds: 1 }, []);
  const promptTokens = tokens.promptTokens;
  ctx.inputTokens = promptTokens;
  const room = pool.max_context_tokens - promptTokens;
  const maxTokens = parsed.maxTokens ?? Math.min(pool.default_max_tokens, room);
  if (room <= 0 || maxTokens > room) {
    return reply(ctx, {
      code: 'context_length_exceeded',
      param: parsed.messages !== null ? 'messages' : 'prompt',
      message: `This model's maximum context length is ${pool.max_context_tokens} tokens. However, you requested ${promptTokens + maxTokens} tokens (${promptTokens} in the ${parsed.messages !== null ? 'messages' : 'prompt'}, ${maxTokens} in the completion). Please reduce the length of the ${parsed.messages !== null ? 'messages' : 'prompt'} or completion.`,
    }, []);
  }
  ctx.maxTokens = maxTokens;

  // Quota: reserve prompt + max_tokens (times n) before any GPU sees the request.
  const cost = promptTokens + maxTokens * parsed.n;
  const quotaStart = performance.now();
  const decision: QuotaDecision = await svc.quota.acquire(tenant.limits, ctx.quotaId, cost);
  ctx.queueMs = performance.now() - quotaStart;
  const limitHeaders = rateLimitHeaders(decision);
  if (!decision.ok) {
    svc.metrics?.quota(decision.code);
    const never = decision.code === 'rate_limit_exceeded' && cost > decision.limitTokens;
    return reply(ctx, {
      code: decision.code,
      retryAfterSeconds: decision.retryAfterSeconds,
      // A request larger than the tenant's burst can never be admitted: say so instead of inviting a retry loop.
      message: never ? `This request needs ${cost} tokens (prompt + max_tokens), more than the tenant's burst of ${decision.limitTokens}; lower max_tokens.` : undefined,
    }, limitHeaders);
  }
  svc.metrics?.quota(decision.degraded ? 'degraded' : 'ok');
  ctx.quotaHeld = true;
  ctx.reservedTokens = cost;
  if (ctx.cancelled) return;
  if (ctx.shutdownAborted) return reply(ctx, { code: 'shutting_down', retryAfterSeconds: 1 }, limitHeaders);

  const servedModel = target.adapter ?? pool.model;
  const upstreamReq = {
    path: PATHS[ctx.route],
    body: upstreamBody(parsed, servedModel, maxTokens),
    headers: { 'content-type': 'application/json', 'x-request-id': ctx.id },
    headersTimeoutMs: parsed.stream ? svc.cfg.upstream.first_token_timeout_ms + 1000 : svc.cfg.upstream.request_timeout_ms,
    bodyTimeoutMs: parsed.stream ? svc.cfg.upstream.first_token_timeout_ms + 60000 : svc.cfg.upstream.request_timeout_ms,
  };
  const baseHeaders: Array<readonly [string, string]> = [...(parsed.stream ? SSE_HEADERS : JSON_HEADERS), ['x-request-id', ctx.id], ...limitHeaders];

  const excluded: number[] = [];
  let last: Rejection | null = null;
  let lastFailure = '';
  for (let attempt = 0; attempt < svc.cfg.upstream.max_attempts; attempt++) {
    const routeReq = { poolId: pool.id, adapter: target.adapter, promptTokens, maxTokens, blockHashes: tokens.blockHashes, excluded };
    const routed = svc.router.route(routeReq);
    if (!routed.ok) {
      if (routed.reason === 'no_healthy_replica' && last === null) {
        return reply(ctx, { code: 'no_healthy_replica', retryAfterSeconds: retryAfterForDownFleet(svc) }, limitHeaders);
      }
      break;
    }
    if (attempt > 0) {
      ctx.retries++;
      svc.metrics?.retry(pool.id, lastFailure);
    }
    excluded.push(routed.slot);
    ctx.slot = routed.slot;
    ctx.replicaId = routed.replicaId;
    svc.metrics?.routed(svc.router.policy.name, routed.replicaId);
    const headers = svc.cfg.expose_route_header ? [...baseHeaders, ['x-gateway-route', svc.router.header(routeReq, routed.decision)] as const] : baseHeaders;
    const entry = svc.registry.ledger.dispatch(routed.slot, promptTokens, maxTokens * parsed.n, pool.block_size);
    ctx.ledgerEntry = entry;
    ctx.phase = 'upstream_wait';
    const outcome = await new Promise<AttemptOutcome>((resolve) => {
      const handler = new UpstreamAttempt(ctx, svc.registry.ledger, headers, svc.cfg.upstream.first_token_timeout_ms, resolve);
      const call = svc.upstream.dispatch(svc.registry.replica(routed.slot).url, upstreamReq, handler);
      handler.call = call;
      ctx.call = call;
      if (ctx.cancelled) call.abort();
    });
    ctx.call = null;
    svc.registry.ledger.end(entry);
    ctx.ledgerEntry = null;
    if (outcome.kind === 'sent') {
      svc.registry.reportDataPlaneSuccess(routed.slot);
      if (outcome.failure !== null) svc.metrics?.upstreamError(outcome.failure);
      return;
    }
    if (outcome.kind === 'cancelled') return;
    if (ctx.shutdownAborted) return reply(ctx, { code: 'shutting_down', retryAfterSeconds: 1 }, limitHeaders);
    last = outcome.rejection;
    const f = outcome.failure;
    lastFailure = f;
    svc.metrics?.upstreamError(f === 'connect' ? 'connect' : f === 'status_5xx' ? 'status_5xx' : f === 'first_token_timeout' || f === 'headers_timeout' ? 'first_token_timeout' : 'reset');
    if (f === 'connect' || f === 'reset') svc.registry.reportDataPlaneFailure(routed.slot);
    svc.log.warn({ request_id: ctx.id, replica: routed.replicaId, failure: f, attempt: attempt + 1 }, 'upstream attempt failed before the first byte');
    if (ctx.cancelled) return;
  }
  return reply(ctx, last ?? { code: 'upstream_unavailable' }, limitHeaders);
}

/** Characters of prompt text: an upper bound of what the tokenizer may have to encode uncached. */
function promptChars(p: ParsedBody): number {
  if (p.prompt !== null) return typeof p.prompt === 'string' ? p.prompt.length : p.prompt.length;
  let n = 0;
  const msgs = p.messages!;
  for (let i = 0; i < msgs.length; i++) {
    const c = msgs[i]!.content;
    if (typeof c === 'string') n += c.length;
    else if (c !== null) for (const part of c) n += part.text?.length ?? 0;
  }
  // tools render into the prompt as JSON: count them as large
  return p.tools !== null ? n + 1_000_000 : n;
}

function rateLimitHeaders(d: QuotaDecision): HeaderList {
  return [
    ['x-ratelimit-limit-tokens', String(d.limitTokens)],
    ['x-ratelimit-remaining-tokens', String(Math.max(0, Math.floor(d.remainingTokens)))],
    ['x-ratelimit-reset-tokens', `${Math.max(0, Math.ceil(d.resetSeconds))}s`],
    ['x-ratelimit-limit-requests', String(d.limitRequests)],
    ['x-ratelimit-remaining-requests', String(Math.max(0, d.remainingRequests))],
  ];
}

/** A down replica is probed every scrape interval and comes back after one good scrape. */
function retryAfterForDownFleet(svc: Services): number {
  return Math.max(1, Math.ceil(svc.cfg.registry.scrape_interval_ms * svc.cfg.registry.down_after_failures / 1000));
}
