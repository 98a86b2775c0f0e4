// The Responses API's own stage, between resolving the model and tokenizing: the conversation vLLM will
// render (instructions, the turn `previous_response_id` names, the input: src/tokenize/responses-messages.ts)
// becomes the request's chat messages, so its token count, quota reservation and block hashes are the
// replica's; and a follow-up is pinned to the replica that stored its previous response (response-owners.ts).
// A previous response the gateway cannot reach is a 404 naming the id, answered here rather than routed
// elsewhere to fail later. Thread: main. Once per Responses request.
import type { PoolConfig } from '../config/schema.ts';
import type { Rejection } from '../errors/rejection.ts';
import { responsesMessages, type ResponsesTurn } from '../tokenize/responses-messages.ts';
import { reply } from './finish-request.ts';
import type { ChatMessageIn, ParsedBody } from './parse-body.ts';
import type { RequestContext } from './request-context.ts';
import type { Services } from './services.ts';

function unreachable(id: string, why: string): Rejection {
  return {
    code: 'previous_response_not_found', param: 'previous_response_id',
    message: `Previous response with id '${id}' cannot be continued: ${why}. Send the conversation again as input, without previous_response_id.`,
  };
}

/**
 * Sets parsed.messages to the conversation; returns the slot the request is pinned to (-1: none), or null
 * when the request was answered.
 */
export function prepareResponses(svc: Services, ctx: RequestContext, parsed: ParsedBody, pool: PoolConfig): number | null {
  const r = parsed.responses!;
  let turn: ResponsesTurn | null = null;
  let pinned = -1;
  const prev = r.previousResponseId;
  if (prev !== null) {
    const found = svc.responses.lookup(prev, ctx.tenant!.name);
    if (!found.ok) {
      const why = found.why === 'restarted'
        ? 'the replica that stored it has restarted since and no longer holds it'
        : 'this gateway has not relayed a stored response with this id for this API key (or it expired)';
      reply(ctx, unreachable(prev, why), []);
      return null;
    }
    const o = found.owner;
    if (o.poolId !== pool.id) {
      reply(ctx, { code: 'invalid_value', param: 'previous_response_id', message: `Previous response with id '${prev}' was produced by another model (pool ${o.poolId}); continue it with that model.` }, []);
      return null;
    }
    const slot = svc.registry.slotOf(o.replicaId);
    if (slot < 0 || !svc.registry.isHealthy(slot)) {
      reply(ctx, unreachable(prev, `the replica that stored it (${o.replicaId}) ${slot < 0 ? 'has left the fleet' : 'is down'}`), []);
      return null;
    }
    turn = found.turn;
    pinned = slot;
  }
  parsed.messages = responsesMessages(r.instructions, turn, r.input) as ChatMessageIn[];
  return pinned;
}
