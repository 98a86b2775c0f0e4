// Validates the fields of a POST /v1/responses body the gateway acts on (parse-body.ts has checked model and
// stream): input, instructions, previous_response_id, store, max_output_tokens, and background, which is
// refused: a background response keeps generating after its HTTP answer, where no quota settlement, usage
// record or cancellation of the gateway's can follow it. Everything else passes through to the replica.
// Thread: main. Per Responses request, once; the input items are walked once.
import type { Rejection } from '../errors/rejection.ts';
import { parseResponsesInput } from '../tokenize/responses-messages.ts';
import type { ChatMessage } from '../tokenize/types.ts';

export interface ResponsesParse {
  fields: { instructions: string | null; previousResponseId: string | null; input: ChatMessage[]; store: boolean };
  maxTokens: number | null;
}

function invalid(param: string, message: string): Rejection {
  return { code: 'invalid_value', param, message };
}

function optionalString(body: Record<string, unknown>, key: string): string | null | Rejection {
  const v = body[key];
  if (v === undefined || v === null) return null;
  if (typeof v !== 'string') return invalid(key, `${key} must be a string`);
  return v;
}

export function parseResponsesFields(body: Record<string, unknown>): ResponsesParse | Rejection {
  if (body.input === undefined || body.input === null) return invalid('input', 'input is required');
  const input = parseResponsesInput(body.input);
  if (!Array.isArray(input)) return invalid(input.param, input.message);
  const instructions = optionalString(body, 'instructions');
  if (instructions !== null && typeof instructions !== 'string') return instructions;
  const previousResponseId = optionalString(body, 'previous_response_id');
  if (previousResponseId !== null && typeof previousResponseId !== 'string') return previousResponseId;
  if (previousResponseId === '') return invalid('previous_response_id', 'previous_response_id must not be empty');
  for (const key of ['store', 'background'] as const) {
    const v = body[key];
    if (v !== undefined && v !== null && typeof v !== 'boolean') return invalid(key, `${key} must be a boolean`);
  }
  if (body.background === true) {
    return invalid('background', 'background responses are not served through this gateway: their work would outlive the request that pays for it');
  }
  let maxTokens: number | null = null;
  const m = body.max_output_tokens;
  if (m !== undefined && m !== null) {
    if (typeof m !== 'number' || !Number.isInteger(m) || m < 1) return invalid('max_output_tokens', 'max_output_tokens must be a positive integer');
    maxTokens = m;
  }
  const tools = body.tools;
  if (tools !== undefined && tools !== null && !Array.isArray(tools)) return invalid('tools', 'tools must be an array');
  return { fields: { instructions, previousResponseId, input, store: body.store !== false }, maxTokens };
}
