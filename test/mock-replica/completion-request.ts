// Parses and validates the body of /v1/chat/completions and /v1/completions the way vLLM's pydantic models
// and serving layer do, into one plain shape the handler uses. Thread: main (mock process). Per request,
// once; cost is JSON.parse of the body.
//
// Fidelity: the fields the mock acts on are validated with vLLM's messages; other OpenAI fields are accepted
// and ignored (vLLM would apply them to sampling). `n` > 1 and several prompts in one completions request
// are rejected with a 400 (vLLM supports them; the mock does not).
import type { ChatMessage, ChatOptions } from '../../src/tokenize/types.ts';
import { badRequest, validationError, type VllmError } from './vllm-errors.ts';

export type CompletionKind = 'chat' | 'completion';

export interface CompletionRequest {
  kind: CompletionKind;
  /** As sent; '' when absent (vLLM then uses the base model). */
  model: string;
  stream: boolean;
  includeUsage: boolean;
  continuousUsage: boolean;
  /** max_completion_tokens ?? max_tokens (chat), max_tokens (completions); null when absent. */
  maxTokens: number | null;
  ignoreEos: boolean;
  seed: number | null;
  /** Chat only. */
  messages: ChatMessage[];
  /** Chat only: the request's `tools` (rendered into the Llama 3.1 prompt), null when absent. */
  tools: unknown[] | null;
  addGenerationPrompt: boolean;
  /** Chat only: the template options as vLLM takes them (add_generation_prompt, continue_final_message, chat_template_kwargs). */
  chat?: ChatOptions;
  /** Completions only: the prompt text, or its token ids. */
  prompt: string | number[];
}

type Body = Record<string, unknown>;

function isInt(v: unknown): v is number {
  return typeof v === 'number' && Number.isInteger(v);
}

function optionalInt(body: Body, field: string): number | null | VllmError {
  const v = body[field];
  if (v === undefined || v === null) return null;
  if (!isInt(v)) return validationError('int_type', ['body', field], 'Input should be a valid integer');
  return v;
}

function optionalBool(body: Body, field: string, dflt: boolean): boolean | VllmError {
  const v = body[field];
  if (v === undefined || v === null) return dflt;
  if (typeof v !== 'boolean') return validationError('bool_type', ['body', field], 'Input should be a valid boolean');
  return v;
}

/**
 * Message content: null, a string, or parts the template's renderer reads (src/tokenize/chat-messages.ts): plain
 * strings (vLLM's content-part union includes str) and text-like parts; media parts are refused (the mock is a
 * text model, as vLLM refuses them for one).
 */
function checkContent(v: unknown, i: number): VllmError | null {
  if (v === undefined || v === null || typeof v === 'string') return null;
  if (Array.isArray(v)) {
    for (const p of v) {
      if (typeof p === 'string') continue;
      const type = p && typeof p === 'object' ? (p as Body).type : undefined;
      const field = type === 'refusal' ? 'refusal' : type === 'text' || type === 'input_text' || type === 'output_text' ? 'text' : null;
      if (field === null || typeof (p as Body)[field] !== 'string') {
        return validationError('value_error', ['body', 'messages', i, 'content'], 'the mock supports text content parts only');
      }
    }
    return null;
  }
  return validationError('string_type', ['body', 'messages', i, 'content'], 'Input should be a valid string');
}

function parseMessages(v: unknown): ChatMessage[] | VllmError {
  if (v === undefined) return validationError('missing', ['body', 'messages'], 'Field required');
  if (!Array.isArray(v)) return validationError('list_type', ['body', 'messages'], 'Input should be a valid list');
  const out: ChatMessage[] = [];
  for (let i = 0; i < v.length; i++) {
    const m = v[i] as Body | null;
    if (!m || typeof m !== 'object' || typeof m.role !== 'string') {
      return validationError('missing', ['body', 'messages', i, 'role'], 'Field required');
    }
    const err = checkContent(m.content, i);
    if (err !== null) return err;
    out.push(m as unknown as ChatMessage);
  }
  return out;
}

function parsePrompt(v: unknown): string | number[] | VllmError {
  if (v === undefined) return validationError('missing', ['body', 'prompt'], 'Field required');
  if (typeof v === 'string') return v;
  if (Array.isArray(v)) {
    if (v.length > 0 && v.every(isInt)) return v as number[];
    if (v.length === 1 && typeof v[0] === 'string') return v[0];
    if (v.length === 1 && Array.isArray(v[0]) && (v[0] as unknown[]).every(isInt)) return v[0] as number[];
    if (v.length === 0) return badRequest('Prompt cannot be empty');
    return badRequest('the mock replica serves one prompt per request');
  }
  return validationError('string_type', ['body', 'prompt'], 'Input should be a valid string');
}

/** Returns the parsed request or the VllmError vLLM would answer with (always a 400 here). */
export function parseCompletionRequest(kind: CompletionKind, raw: string): CompletionRequest | VllmError {
  let body: Body;
  try {
    const parsed: unknown = JSON.parse(raw);
    if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) {
      return validationError('model_attributes_type', ['body'], 'Input should be a valid dictionary or object to extract fields from');
    }
    body = parsed as Body;
  } catch {
    return validationError('json_invalid', ['body', 0], 'JSON decode error');
  }
  const model = body.model;
  if (model !== undefined && model !== null && typeof model !== 'string') {
    return validationError('string_type', ['body', 'model'], 'Input should be a valid string');
  }
  const stream = optionalBool(body, 'stream', false);
  if (typeof stream !== 'boolean') return stream;
  const ignoreEos = optionalBool(body, 'ignore_eos', false);
  if (typeof ignoreEos !== 'boolean') return ignoreEos;
  const addGenerationPrompt = optionalBool(body, 'add_generation_prompt', true);
  if (typeof addGenerationPrompt !== 'boolean') return addGenerationPrompt;
  const maxTokensField = optionalInt(body, 'max_tokens');
  if (typeof maxTokensField === 'object' && maxTokensField !== null) return maxTokensField;
  const maxCompletion = kind === 'chat' ? optionalInt(body, 'max_completion_tokens') : null;
  if (typeof maxCompletion === 'object' && maxCompletion !== null) return maxCompletion;
  const seed = optionalInt(body, 'seed');
  if (typeof seed === 'object' && seed !== null) return seed;
  const n = optionalInt(body, 'n');
  if (typeof n === 'object' && n !== null) return n;
  if (n !== null && n !== 1) return badRequest('the mock replica supports n=1 only');

  const maxTokens = maxCompletion ?? maxTokensField;
  if (maxTokens !== null && maxTokens < 1) return badRequest(`max_tokens must be at least 1, got ${maxTokens}.`);

  let includeUsage = false;
  let continuousUsage = false;
  const so = body.stream_options;
  if (so !== undefined && so !== null) {
    if (!stream) return badRequest('Stream options can only be defined when `stream=True`.');
    if (typeof so !== 'object' || Array.isArray(so)) {
      return validationError('model_type', ['body', 'stream_options'], 'Input should be a valid dictionary');
    }
    includeUsage = (so as Body).include_usage === true;
    continuousUsage = (so as Body).continuous_usage_stats === true;
  }

  let messages: ChatMessage[] = [];
  let tools: unknown[] | null = null;
  let prompt: string | number[] = '';
  if (kind === 'chat') {
    const m = parseMessages(body.messages);
    if (!Array.isArray(m)) return m;
    messages = m;
    if (body.tools !== undefined && body.tools !== null) {
      if (!Array.isArray(body.tools)) return validationError('list_type', ['body', 'tools'], 'Input should be a valid list');
      tools = body.tools as unknown[];
    }
  } else {
    const p = parsePrompt(body.prompt);
    if (typeof p !== 'string' && !Array.isArray(p)) return p;
    prompt = p;
  }
  return {
    kind,
    model: typeof model === 'string' ? model : '',
    stream,
    includeUsage,
    continuousUsage,
    maxTokens,
    ignoreEos,
    seed,
    messages,
    tools,
    addGenerationPrompt,
    chat: {
      addGenerationPrompt,
      continueFinalMessage: body.continue_final_message === true,
      templateKwargs: typeof body.chat_template_kwargs === 'object' && body.chat_template_kwargs !== null && !Array.isArray(body.chat_template_kwargs) ? body.chat_template_kwargs as Record<string, unknown> : null,
    },
    prompt,
  };
}
