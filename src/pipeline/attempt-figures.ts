// The figures an upstream attempt takes for billing and routing once its response has been relayed: from a
// stream relay (the replica's usage, else the token events relayed) or from a non-streamed body (chat and
// completions: read without parsing the text; a Responses object: parsed whole, since its id and output
// texts are needed too). Thread: main. Once per attempt.
import { jsonFigures, replyText } from '../relay/json-figures.ts';
import { responseFigures, responsesFinishReason } from '../relay/responses-figures.ts';
import type { StreamRelay } from '../relay/stream-relay.ts';
import type { RequestContext } from './request-context.ts';

/** What a non-streamed body said beyond the counts; all null when the body could not be read. */
export interface BodyFigures {
  /** Cached prompt tokens the replica reported. */
  cached: number | null;
  /** The stored response's id and output texts (Responses API only). */
  responseId: string | null;
  outputTexts: string[];
  /** The reply text for its block hashes; only read when `wantReply`. */
  reply: string | null;
}

/** Sets the context's counts from a relay; returns the cached tokens the replica reported, if it did. */
export function streamFigures(ctx: RequestContext, relay: StreamRelay): number | null {
  ctx.finishReason = relay.finishReason;
  if (relay.usage === null) {
    ctx.outputTokens = relay.tokens;
    return null;
  }
  ctx.outputTokens = relay.usage.completionTokens;
  ctx.cachedTokens = relay.usage.cachedTokens;
  if (relay.usage.promptTokens > 0) ctx.inputTokens = relay.usage.promptTokens;
  return relay.usage.cachedTokens;
}

/** Sets the context's counts from a 200 body. A body that cannot be read leaves the gateway's own counts. */
export function jsonBodyFigures(ctx: RequestContext, body: Buffer, wantReply: boolean): BodyFigures {
  if (ctx.route === 'responses') return responsesBody(ctx, body);
  const f = jsonFigures(body);
  if (f === null) return { cached: null, responseId: null, outputTexts: [], reply: null };
  ctx.outputTokens = f.completionTokens;
  ctx.cachedTokens = f.cachedTokens;
  if (f.promptTokens > 0) ctx.inputTokens = f.promptTokens;
  ctx.finishReason = f.finishReason;
  const reply = wantReply && finishedReply(f.finishReason) ? replyText(body, ctx.route === 'chat') : null;
  return { cached: f.cachedTokens, responseId: null, outputTexts: [], reply };
}

function responsesBody(ctx: RequestContext, body: Buffer): BodyFigures {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    return { cached: null, responseId: null, outputTexts: [], reply: null };
  }
  const f = responseFigures(parsed);
  ctx.finishReason = responsesFinishReason(f, ctx.maxTokens);
  if (f.usage !== null) {
    ctx.outputTokens = f.usage.completionTokens;
    ctx.cachedTokens = f.usage.cachedTokens;
    if (f.usage.promptTokens > 0) ctx.inputTokens = f.usage.promptTokens;
  }
  return { cached: f.usage?.cachedTokens ?? null, responseId: f.id, outputTexts: f.outputTexts, reply: f.outputTexts.join('') };
}

export function finishedReply(finishReason: string | null): finishReason is 'stop' | 'length' {
  return finishReason === 'stop' || finishReason === 'length';
}
