// THE life of a completion request, in order (run() reads as this list):
//   parse the body → resolve the model → tokenize (count + block hashes) → context check → quota (reserve
//   prompt + max_tokens, take a lease) → admission, which routes (admit.ts, src/admission/: now, after a wait
//   in its queue, or 429) → dispatch + relay (dispatch.ts, upstream-attempt.ts; admitted again, on another
//   replica, while nothing reached the client) → settle exactly once (finish-request.ts: quota, usage
//   record, metrics, one log line).
// Each stage either returns what the next needs or answers the client itself and returns null.
// Expected rejections are values (Rejection), answered with pre-serialised bodies; exceptions are bugs.
// Thread: main. Hot path: everything here runs per request; the only awaits are the body, a tokenize on a
// worker, a quota store across the network, the admission queue (only when the pool is full) and the
// upstream attempts: a stage that answers in process is not awaited (each await is a promise, a microtask hop
// and a resumed frame).
import type { PoolConfig } from '../config/schema.ts';
import { errorEvent, responsesErrorEvent } from '../errors/openai-error-body.ts';
import type { ClientSink, HeaderList } from '../relay/client-sink.ts';
import type { QuotaDecision } from '../quota/types.ts';
import type { AdmissionRequest } from '../admission/types.ts';
import { kvReplyTokens } from '../gpu-time/reply-length/reply-forecast.ts';
import type { AttemptOutcome } from '../upstream/retry-policy.ts';
import { admit } from './admit.ts';
import { afterAttempt, UpstreamJob, type TokenizedPrompt } from './dispatch.ts';
import { finishRequest, reply } from './finish-request.ts';
import type { ModelTarget } from './model-catalog.ts';
import { parseBody, type ParsedBody, type Route } from './parse-body.ts';
import { RequestContext } from './request-context.ts';
import { requestIdFor } from './request-id.ts';
import { prepareResponses } from './responses-stage.ts';
import type { Services, TenantIdentity } from './services.ts';


export interface IncomingCompletion {
  route: Route;
  /** Authenticated from the Authorization header before the body is read (src/server/app.ts). */
  tenant: TenantIdentity;
  /** Resolves with the body, or null when the client went away or the body was over the limit (already answered). */
  body: Promise<Buffer | null>;
  /** Endpoint picker mode (src/epp/): the only slots this request may be routed to (its subset hint). */
  subset?: readonly number[];
  /** Called once the request has settled (the acceptor's in-flight count): a hook, not another async frame. */
  settled?: (ctx: RequestContext) => void;
}

export function newContext(route: Route, sink: ClientSink, requestId: string | undefined): RequestContext {
  return new RequestContext(requestIdFor(requestId), route, sink, performance.now());
}

/**
 * Runs one request to its end and settles it; never rejects (an internal error is answered, a settlement
 * failure logged), so callers may leave it unawaited. `req.settled` runs last, once.
 */
export async function handleCompletion(svc: Services, ctx: RequestContext, req: IncomingCompletion): Promise<void> {
  ctx.sink.setAbortHandler(() => onClientAbort(svc, ctx));
  try {
    await run(svc, ctx, req);
  } catch (err) {
    internalError(svc, ctx, err);
  }
  try {
    const settling = finishRequest(svc, ctx);
    if (settling !== undefined) await settling;
  } catch (err) {
    svc.log.error({ err, request_id: ctx.id }, 'request settlement failed');
  }
  req.settled?.(ctx);
}

/** A bug reached the top of the request: logged, answered 500 (or an error event once streaming), counted. */
function internalError(svc: Services, ctx: RequestContext, err: unknown): void {
  try {
    svc.log.error({ err, request_id: ctx.id }, 'request failed with an internal error');
    if (!ctx.sink.started) reply(ctx, { code: 'internal_error' }, []);
    else ctx.sink.cork(() => ctx.sink.end((ctx.route === 'responses' ? responsesErrorEvent : errorEvent)({ code: 'internal_error' })));
  } catch (again) {
    svc.log.error({ err: again, request_id: ctx.id }, 'answering an internal error failed');
  }
  ctx.status = ctx.sink.started && ctx.status === 200 ? 200 : 500;
  ctx.code = 'internal_error';
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

// The awaits stay in run() and the stages around them are plain functions: an async function per stage would
// add a promise, a suspended frame and a microtask hop each, per request (≈ 1.2 KiB allocated per request,
// measured with `npm run bench -- pipeline --alloc-sites`).
async function run(svc: Services, ctx: RequestContext, req: IncomingCompletion): Promise<void> {
  ctx.tenant = req.tenant;
  const parsed = parse(ctx, await req.body);
  if (parsed === null) return;
  const target = resolve(svc, ctx, parsed, req.tenant);
  if (target === null) return;
  const previous = parsed.responses?.previousResponseId ?? null;
  if (previous !== null) {
    // With acceptor threads, the id may still be on its way from the thread that relayed it.
    const arrival = svc.responses.whenKnown(previous, req.tenant.name);
    if (arrival !== null) await arrival;
  }
  const pinned = parsed.responses !== null ? prepareResponses(svc, ctx, parsed, target.pool) : -1;
  if (pinned === null) return;
  ctx.trace?.stage('tokenize');
  let prompt: TokenizedPrompt;
  try {
    const measured = svc.tokenizer.measure(promptWork(parsed, target), tokenizeSignal(svc, ctx, parsed));
    prompt = measured instanceof Promise ? await measured : measured;
  } catch (err) {
    return tokenizeFailed(ctx, parsed, err);
  }
  ctx.trace?.done('ok');
  if (halted(ctx, [])) return;
  if (prompt.estimated !== undefined && prompt.estimated !== null) templateFallback(svc, target.pool.id, prompt.estimated);
  ctx.inputTokens = prompt.promptTokens;
  const maxTokens = checkContext(ctx, parsed, target.pool, prompt.promptTokens);
  if (maxTokens === null) return;
  const cost = prompt.promptTokens + maxTokens * parsed.n;
  ctx.trace?.stage('quota');
  // A store that decides in process answers without a promise (memory, the threads' shared table).
  const quota = svc.quota;
  const decision = quota.acquireNow !== undefined ? quota.acquireNow(req.tenant.limits, ctx.quotaId, cost) : await quota.acquire(req.tenant.limits, ctx.quotaId, cost);
  ctx.trace?.done(decision.ok ? 'ok' : decision.code);
  const limitHeaders = quotaGranted(svc, ctx, req.tenant, decision, cost);
  if (limitHeaders === null) return;
  const job = new UpstreamJob(svc, ctx, parsed, target, prompt, maxTokens, limitHeaders, pinned);
  if (req.subset !== undefined) job.routeReq.subset = req.subset;
  const areq: AdmissionRequest = {
    route: job.routeReq, n: parsed.n, tier: req.tenant.slaTier, blockSize: target.pool.block_size,
    promptParam: promptParam(parsed),
  };
  // What admission reserved for it (its need with nothing cached: request-figures.ts), given back at each attempt's end.
  const reservation = prompt.promptTokens + kvReplyTokens(job.routeReq) * parsed.n;
  for (;;) {
    // Admission routes the attempt when the pool has room (it may hold it in its queue first) and
    // dispatches it; its KV reservation goes back, and the queue is pumped, when the attempt ends.
    const pending = admit(svc, ctx, job, areq);
    const admitted = pending instanceof Promise ? await pending : pending;
    if (admitted === null) return;
    let outcome: AttemptOutcome;
    try {
      outcome = await admitted.outcome;
    } finally {
      svc.admission.released(job.poolId, reservation);
    }
    if (!afterAttempt(svc, ctx, job, admitted.routed, outcome)) return;
  }
}

/** The body, validated; null when the request has ended (client gone, too large, invalid). */
function parse(ctx: RequestContext, bytes: Buffer | null): ParsedBody | null {
  if (bytes === null || ctx.cancelled) {
    if (!ctx.cancelled) ctx.status = 413;
    return null;
  }
  const parsed = parseBody(ctx.route, bytes);
  if ('code' in parsed) {
    reply(ctx, parsed, []);
    return null;
  }
  ctx.model = parsed.model;
  ctx.stream = parsed.stream;
  ctx.includeUsage = parsed.includeUsage;
  return parsed;
}

/** The pool (and adapter) the model names, if it exists and the tenant may use it. */
function resolve(svc: Services, ctx: RequestContext, parsed: ParsedBody, tenant: TenantIdentity): ModelTarget | null {
  const target = svc.catalog.resolve(parsed.model);
  if (target === undefined) {
    reply(ctx, { code: 'model_not_found', param: 'model', message: `The model \`${parsed.model}\` does not exist.` }, []);
    return null;
  }
  const pool = target.pool;
  ctx.poolId = pool.id;
  ctx.adapter = target.adapter;
  if (tenant.allowedModels.length > 0 && !tenant.allowedModels.includes(pool.id) && !tenant.allowedModels.includes(parsed.model)) {
    reply(ctx, { code: 'model_not_allowed', param: 'model' }, []);
    return null;
  }
  return target;
}

/** What the tokenizer encodes: the chat messages (and tools) or the completion prompt, on the target's pool. */
function promptWork(parsed: ParsedBody, target: ModelTarget): Parameters<Services['tokenizer']['measure']>[0] {
  return parsed.messages !== null
    ? { pool: target.pool, kind: 'chat', messages: parsed.messages, tools: parsed.tools, chat: parsed.chat ?? null, adapter: target.adapter }
    : { pool: target.pool, kind: 'completion', prompt: parsed.prompt!, adapter: target.adapter };
}

/**
 * Prompts up to the inline cut-off take well under a millisecond to tokenize: nothing worth cancelling, so no
 * signal (and no AbortController) is built for them.
 */
function tokenizeSignal(svc: Services, ctx: RequestContext, parsed: ParsedBody): AbortSignal | undefined {
  return promptChars(parsed) > svc.cfg.tokenizer.inline_max_chars ? ctx.signal() : undefined;
}

/** (pool, reason) pairs this thread has logged: a template that cannot be rendered is logged once, not per request. */
const fallbacksLogged = new Set<string>();

/**
 * The prompt was counted on an estimate because the pool's template could not be rendered as vLLM renders it:
 * the request is served (vLLM renders for itself), counted, and logged once per pool and reason.
 */
function templateFallback(svc: Services, pool: string, reason: string): void {
  svc.metrics?.templateFallback?.(pool, reason);
  const key = `${pool}\u0000${reason}`;
  if (fallbacksLogged.has(key)) return;
  fallbacksLogged.add(key);
  svc.log.warn({ component: 'tokenize', pool, reason }, 'chat template not rendered as vLLM renders it: requests are routed on a token estimate (logged once per pool and reason; see gateway_template_fallback_total)');
}

/** Tokenization failed: the client left or shutdown gave up (the abort), or the template refused the prompt (400). */
function tokenizeFailed(ctx: RequestContext, parsed: ParsedBody, err: unknown): void {
  if (halted(ctx, [])) return;
  if ((err as Error).name !== 'ChatTemplateError') throw err;
  reply(ctx, { code: 'invalid_value', param: promptParam(parsed), message: `The prompt could not be tokenized: ${(err as Error).message}` }, []);
}

/** max_tokens for the request (the pool's default, capped by the room left); null when it does not fit. */
function checkContext(ctx: RequestContext, parsed: ParsedBody, pool: PoolConfig, promptTokens: number): number | null {
  const room = pool.max_context_tokens - promptTokens;
  const maxTokens = parsed.maxTokens ?? Math.min(pool.default_max_tokens, room);
  if (room <= 0 || maxTokens > room) {
    const what = promptParam(parsed);
    // The prompt alone too long: vLLM's own wording for it (no completion to count, and with max_tokens
    // absent the room left would read as a negative completion).
    const limit = `This model's maximum context length is ${pool.max_context_tokens} tokens. However,`;
    const message = room <= 0
      ? `${limit} your request has ${promptTokens} input tokens. Please reduce the length of the ${what}.`
      : `${limit} you requested ${promptTokens + maxTokens} tokens (${promptTokens} in the ${what}, ${maxTokens} in the completion). Please reduce the length of the ${what} or completion.`;
    reply(ctx, { code: 'context_length_exceeded', param: what, message }, []);
    return null;
  }
  ctx.maxTokens = maxTokens;
  return maxTokens;
}

/**
 * The quota store's answer to reserving prompt + max_tokens × n (before any GPU sees the request). Returns the
 * rate-limit headers every later answer carries; null when the request has ended (refused, cancelled, shutdown).
 */
function quotaGranted(svc: Services, ctx: RequestContext, tenant: TenantIdentity, decision: QuotaDecision, cost: number): HeaderList | null {
  const limitHeaders = rateLimitHeaders(decision);
  if (!decision.ok) {
    svc.metrics?.quota(decision.code);
    const burst = tenant.limits.burstTokens;
    if (decision.code !== 'quota_unavailable' && cost > burst) {
      // Larger than the tenant's whole burst: no wait makes it fit. So no Retry-After, and x-should-retry: false,
      // which the openai SDKs obey (they retry every other 429, sleeping Retry-After first).
      reply(ctx, {
        code: 'rate_limit_exceeded',
        message: `This request needs ${cost} tokens (prompt + max_tokens × n), more than the tenant's burst of ${burst}; it can never be admitted: lower max_tokens.`,
      }, [...limitHeaders, NO_RETRY]);
      return null;
    }
    reply(ctx, { code: decision.code, retryAfterSeconds: decision.retryAfterSeconds }, limitHeaders);
    return null;
  }
  svc.metrics?.quota(decision.degraded ? 'degraded' : 'ok');
  ctx.quotaHeld = true;
  ctx.reservedTokens = cost;
  return halted(ctx, limitHeaders) ? null : limitHeaders;
}

/** The request must stop: the client left (nothing to answer), or shutdown gave up on it (503). */
function halted(ctx: RequestContext, headers: HeaderList): boolean {
  if (ctx.cancelled) return true;
  if (!ctx.shutdownAborted) return false;
  reply(ctx, { code: 'shutting_down', retryAfterSeconds: 1 }, headers);
  return true;
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

const NO_RETRY = ['x-should-retry', 'false'] as const;

/** The field the prompt came from, for errors that name it. */
function promptParam(p: ParsedBody): 'messages' | 'prompt' | 'input' {
  return p.responses !== null ? 'input' : p.messages !== null ? 'messages' : 'prompt';
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
