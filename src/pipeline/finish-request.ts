// The two ways a request leaves the pipeline: reply() answers with an error envelope (before any byte was
// sent), and finishRequest() settles everything exactly once: the quota reservation (refund reserved − used,
// release the lease), the usage record, metrics and one log line. (Each attempt releases its own ledger
// entry when it ends: upstream-attempt.ts.)
// Thread: main. Runs once per request.
import { statusOf, type Rejection } from '../errors/rejection.ts';
import { errorBody } from '../errors/openai-error-body.ts';
import type { HeaderList } from '../relay/client-sink.ts';
import { requestLogLevel, requestLogLine, type RequestLogFields } from '../logging/logger.ts';
import type { RequestContext } from './request-context.ts';
import type { Services } from './services.ts';

/** HTTP status recorded for a request whose client went away first (nginx's convention). */
export const STATUS_CLIENT_CLOSED = 499;

export function reply(ctx: RequestContext, r: Rejection, extra: HeaderList): void {
  const status = statusOf(r);
  ctx.status = status;
  ctx.code = r.wireCode ?? r.code;
  const sink = ctx.sink;
  if (sink.started || sink.aborted) return;
  const body = errorBody(r);
  const headers: Array<readonly [string, string]> = [['content-type', 'application/json'], ['x-request-id', ctx.id]];
  // Every 429 and 503 says when to come back, computed by the stage that refused (at least 1 s).
  if (r.retryAfterSeconds !== undefined) headers.push(['retry-after', String(Math.max(1, Math.ceil(r.retryAfterSeconds)))]);
  for (let i = 0; i < extra.length; i++) headers.push(extra[i]!);
  sink.cork(() => {
    sink.begin(status, headers);
    sink.end(body);
  });
}

/**
 * Settles the request once. Returns a promise only when the quota store settles across the network (Redis);
 * a store that settles in process is called synchronously and nothing is returned to await.
 */
export function finishRequest(svc: Services, ctx: RequestContext): Promise<void> | undefined {
  if (ctx.finished) return undefined;
  ctx.finished = true;
  if (ctx.cancelled) {
    ctx.status = STATUS_CLIENT_CLOSED;
    ctx.code = 'client_closed_request';
  }
  const tenant = ctx.tenant;
  if (ctx.quotaHeld && tenant !== null) {
    ctx.quotaHeld = false;
    // Charged only when a replica produced output: prompt + output tokens; everything else is refunded.
    const produced = ctx.ttftMs !== null || (ctx.status === 200 && !ctx.stream) ? ctx.inputTokens + ctx.outputTokens : 0;
    const used = Math.min(produced, ctx.reservedTokens);
    const quota = svc.quota;
    if (quota.settleNow === undefined) return settleThenRecord(svc, ctx, tenant, used);
    try {
      quota.settleNow(tenant.limits, ctx.quotaId, ctx.reservedTokens, used);
    } catch (err) {
      svc.log.error({ err, request_id: ctx.id }, 'quota settlement failed');
    }
  }
  record(svc, ctx, tenant);
  return undefined;
}

async function settleThenRecord(svc: Services, ctx: RequestContext, tenant: NonNullable<RequestContext['tenant']>, used: number): Promise<void> {
  try {
    await svc.quota.settle(tenant.limits, ctx.quotaId, ctx.reservedTokens, used);
  } catch (err) {
    svc.log.error({ err, request_id: ctx.id }, 'quota settlement failed');
  }
  record(svc, ctx, tenant);
}

/** The reply-length model, the usage record, metrics, the trace and the log line, after the quota settled. */
function record(svc: Services, ctx: RequestContext, tenant: RequestContext['tenant']): void {
  // A reply that finished (not cut short by the client, an error or a lost replica) teaches its pool's
  // reply-length model its length; its median forecast's error goes to the gauge.
  const forecast = ctx.replyForecast;
  if (forecast !== null && ctx.status === 200 && !ctx.cancelled && ctx.finishReason !== null && ctx.finishReason !== 'abort') {
    svc.replyLengths?.finished(forecast, ctx.outputTokens / ctx.sequences);
  }
  const durationMs = performance.now() - ctx.startedAt;
  if (tenant !== null && svc.usage.active) {
    svc.usage.record({
      request_id: ctx.id,
      tenant: tenant.name,
      model: ctx.model,
      pool: ctx.poolId,
      adapter: ctx.adapter,
      replica: ctx.replicaId,
      status: ctx.status,
      finish_reason: ctx.finishReason,
      input_tokens: ctx.inputTokens,
      output_tokens: ctx.outputTokens,
      cached_tokens: ctx.cachedTokens,
      predicted_cached_tokens: ctx.predictedCachedTokens,
      ttft_ms: ctx.ttftMs === null ? null : round1(ctx.ttftMs),
      duration_ms: round1(durationMs),
      retries: ctx.retries,
      cancelled: ctx.cancelled,
      queue_ms: round1(ctx.queueMs),
      ts: new Date().toISOString(),
    });
  }
  svc.metrics?.requestEnded({
    route: ctx.route,
    pool: ctx.poolId,
    tenant: tenant?.name ?? null,
    status: ctx.status,
    code: ctx.code,
    stream: ctx.stream,
    ttftSeconds: ctx.ttftMs === null ? null : ctx.ttftMs / 1000,
    durationSeconds: durationMs / 1000,
    upstreamSeconds: ctx.upstreamMs / 1000,
    queueSeconds: ctx.queueMs / 1000,
    // Token counters measure work sent to replicas: a request refused before routing counts none.
    inputTokens: ctx.replicaId === null ? 0 : ctx.inputTokens,
    outputTokens: ctx.outputTokens,
    cachedTokens: ctx.cachedTokens,
    predictedCachedTokens: ctx.replicaId !== null && ctx.status === 200 ? ctx.predictedCachedTokens : null,
    replica: ctx.replicaId,
    retries: ctx.retries,
    cancelled: ctx.cancelled,
    tpotSeconds: ctx.ttftMs !== null && ctx.outputTokens > 1 ? (durationMs - ctx.ttftMs) / 1000 / (ctx.outputTokens - 1) : null,
  });
  ctx.trace?.end(ctx);
  // A line whose level is disabled (info lines at LOG_LEVEL=warn) is not built at all: ≈ 0.4 KB per request.
  if (svc.log.isLevelEnabled?.(requestLogLevel(ctx.status, ctx.code)) === false) return;
  const f = logFields;
  f.requestId = ctx.id;
  f.route = ctx.route;
  f.tenant = tenant?.name ?? null;
  f.model = ctx.model || null;
  f.pool = ctx.poolId;
  f.replica = ctx.replicaId;
  f.status = ctx.status;
  f.code = ctx.code;
  f.stream = ctx.stream;
  f.durationMs = durationMs;
  f.ttftMs = ctx.ttftMs;
  f.queueMs = ctx.queueMs;
  f.inputTokens = ctx.inputTokens;
  f.outputTokens = ctx.outputTokens;
  f.cachedTokens = ctx.cachedTokens;
  f.retries = ctx.retries;
  f.cancelled = ctx.cancelled;
  f.finishReason = ctx.finishReason;
  requestLogLine(svc.log, f);
}

/**
 * The log line's fields, reused by every request of this thread: requestLogLine copies them into the record
 * it writes synchronously, so the line costs that one object, not two.
 */
const logFields: RequestLogFields = {
  requestId: '', route: 'chat', tenant: null, model: null, pool: null, replica: null, status: 0, code: null, stream: false,
  durationMs: 0, ttftMs: null, queueMs: 0, inputTokens: 0, outputTokens: 0, cachedTokens: 0, retries: 0, cancelled: false,
  finishReason: null,
};

function round1(x: number): number {
  return Math.round(x * 10) / 10;
}
