// The chat messages a Responses API request becomes, in the order vLLM's serving_responses builds them for a
// model without Harmony (docs/vllm-facts.md "Responses API"): `instructions` as a system message, then the
// stored conversation of `previous_response_id` (that request's own messages, its system message included,
// then one assistant message per output text), then `input` (a string is one user message; message items
// keep their role, their text parts become the template's text parts). The gateway renders the same list to
// count and hash the prompt; the mock replica renders it to serve the request.
// Thread: any. Per Responses request, once: one small array and one object per message.
import type { ChatContentPart, ChatMessage } from './types.ts';

/** A stored turn: the messages that request was rendered from, and the texts of its output messages. */
export interface ResponsesTurn {
  readonly messages: readonly ChatMessage[];
  readonly outputTexts: readonly string[];
}

/** Content part types that carry text in Responses input (what the client sent, or an earlier reply). */
const TEXT_PARTS = new Set(['input_text', 'output_text', 'text']);

/** Roles a message item of `input` may take. */
export const RESPONSES_ROLES: ReadonlySet<string> = new Set(['user', 'assistant', 'system', 'developer']);

/**
 * One input item as a chat message: its role, and its content as a string or as text parts (joined with
 * "\n" by the template, as chat content parts are). Items were validated by the caller.
 */
export function inputItemMessage(item: { role: string; content: unknown }): ChatMessage {
  const c = item.content;
  if (typeof c === 'string') return { role: item.role, content: c };
  const parts: ChatContentPart[] = [];
  for (const p of c as Array<{ type: string; text?: string }>) {
    if (TEXT_PARTS.has(p.type)) parts.push({ type: 'text', text: p.text ?? '' });
  }
  return { role: item.role, content: parts };
}

/** Whether a content part type carries text the template renders. */
export function isTextPart(type: unknown): boolean {
  return typeof type === 'string' && TEXT_PARTS.has(type);
}

/** The request's own messages (what vLLM stores for it): instructions, the previous turn, then the input. */
export function responsesMessages(instructions: string | null, previous: ResponsesTurn | null, input: readonly ChatMessage[]): ChatMessage[] {
  const out: ChatMessage[] = [];
  if (instructions !== null && instructions !== '') out.push({ role: 'system', content: instructions });
  if (previous !== null) {
    for (const m of previous.messages) out.push(m);
    for (const t of previous.outputTexts) out.push({ role: 'assistant', content: t });
  }
  for (const m of input) out.push(m);
  return out;
}

/** What is wrong with an `input`, for the caller's 400 (param names the field). */
export interface InputProblem {
  readonly param: string;
  readonly message: string;
}

/**
 * `input` as chat messages: a string, or an array of message items ({role, content} with an optional
 * `type: "message"`; content a string or text parts). Other item types (function calls, reasoning, item
 * references) are refused: a model without Harmony has no rendering for them.
 */
export function parseResponsesInput(input: unknown): ChatMessage[] | InputProblem {
  if (typeof input === 'string') return [{ role: 'user', content: input }];
  if (!Array.isArray(input)) return { param: 'input', message: 'input must be a string or an array of message items' };
  if (input.length === 0) return { param: 'input', message: 'input must not be empty' };
  const out: ChatMessage[] = [];
  for (let i = 0; i < input.length; i++) {
    const item = input[i] as Record<string, unknown> | null;
    if (item === null || typeof item !== 'object' || Array.isArray(item)) return { param: `input[${i}]`, message: 'each input item must be an object' };
    if (item.type !== undefined && item.type !== 'message') return { param: `input[${i}].type`, message: `input items of type ${JSON.stringify(item.type)} are not supported; send message items` };
    if (typeof item.role !== 'string' || !RESPONSES_ROLES.has(item.role)) return { param: `input[${i}].role`, message: `unsupported role ${JSON.stringify(item.role)}` };
    const c = item.content;
    if (Array.isArray(c)) {
      for (let j = 0; j < c.length; j++) {
        const p = c[j] as Record<string, unknown> | null;
        if (p === null || typeof p !== 'object' || !isTextPart(p.type) || typeof p.text !== 'string') {
          return { param: `input[${i}].content[${j}]`, message: 'only input_text and output_text content parts are supported' };
        }
      }
    } else if (typeof c !== 'string') {
      return { param: `input[${i}].content`, message: 'content must be a string or an array of text parts' };
    }
    out.push(inputItemMessage({ role: item.role, content: c }));
  }
  return out;
}
