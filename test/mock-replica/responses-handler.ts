// The mock's Responses API, as vLLM serves it for a model without Harmony with
// VLLM_ENABLE_RESPONSES_API_STORE=1: POST /v1/responses (streamed or not, `background` too),
// GET /v1/responses/{id}, POST /v1/responses/{id}/cancel. Stored responses live in this process only (a
// restarted replica has forgotten them), so a follow-up naming `previous_response_id` must come back here.
// Thread: main (mock process). Per request: one parse, one render of the conversation, the engine's events.
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { ChatTemplateError } from '../../src/tokenize/chat-template.ts';
import { parseResponsesInput, responsesMessages, type ResponsesTurn } from '../../src/tokenize/responses-messages.ts';
import { DEFAULT_MAX_TOKENS_CAP, sendError, sendJson, type HandlerContext } from './completion-handler.ts';
import type { EngineRequestEvents } from './engine/types.ts';
import type { FaultSpec } from './faults.ts';
import { fullText, hashTokens, planOutput, tokenText } from './output-text.ts';
import { FrameWriter } from './frame-writer.ts';
import { promptTokens, type PromptTokens } from './prompt-tokens.ts';
import { outputBlockHashes, sequenceTokenIds } from './reply-hashes.ts';
import { ResponseEvents, outputMessage, responseObject, type ResponseEcho, type ResponseStatus, type ResponsesUsage } from './responses-frames.ts';
import { ErrorType, VllmError, badRequest, modelNotFound, validationError } from './vllm-errors.ts';

/**
 * Stored responses kept, oldest dropped first. vLLM's store grows without bound for the life of the process;
 * the mock bounds it so a long demo run stays small.
 */
const MAX_STORED = 10_000;

interface Stored {
  response: Record<string, unknown>;
  turn: ResponsesTurn;
  /** The engine request of a background response still running (cancel aborts it); null once done. */
  engineId: string | null;
}

export class ResponsesStore {
  private readonly map = new Map<string, Stored>();

  get(id: string): Stored | undefined {
    return this.map.get(id);
  }

  put(id: string, s: Stored): void {
    this.map.delete(id);
    this.map.set(id, s);
    if (this.map.size > MAX_STORED) this.map.delete(this.map.keys().next().value!);
  }

  get size(): number {
    return this.map.size;
  }
}

function notFound(id: string): VllmError {
  return new VllmError(404, ErrorType.InvalidRequest, `Response with id '${id}' not found.`);
}

function hex32(): string {
  return randomUUID().replace(/-/g, '');
}

interface ResponsesRequest {
  model: string;
  stream: boolean;
  store: boolean;
  background: boolean;
  instructions: string | null;
  previousResponseId: string | null;
  maxOutputTokens: number | null;
  /** Mock extension (as for chat): generate exactly max_output_tokens. vLLM ignores the field here. */
  ignoreEos: boolean;
  input: unknown;
}

function parse(raw: string): ResponsesRequest | VllmError {
  let body: Record<string, unknown>;
  try {
    const v: unknown = JSON.parse(raw);
    if (!v || typeof v !== 'object' || Array.isArray(v)) return validationError('model_attributes_type', ['body'], 'Input should be a valid dictionary or object to extract fields from');
    body = v as Record<string, unknown>;
  } catch {
    return validationError('json_invalid', ['body', 0], 'JSON decode error');
  }
  for (const f of ['stream', 'store', 'background', 'ignore_eos'] as const) {
    const v = body[f];
    if (v !== undefined && v !== null && typeof v !== 'boolean') return validationError('bool_type', ['body', f], 'Input should be a valid boolean');
  }
  for (const f of ['model', 'instructions', 'previous_response_id'] as const) {
    const v = body[f];
    if (v !== undefined && v !== null && typeof v !== 'string') return validationError('string_type', ['body', f], 'Input should be a valid string');
  }
  const mot = body.max_output_tokens;
  if (mot !== undefined && mot !== null && !(typeof mot === 'number' && Number.isInteger(mot))) return validationError('int_type', ['body', 'max_output_tokens'], 'Input should be a valid integer');
  if (body.input === undefined) return validationError('missing', ['body', 'input'], 'Field required');
  if (Array.isArray(body.tools) && body.tools.length > 0) return new VllmError(501, ErrorType.BadRequest, 'Tool use is not supported in Responses API without Harmony');
  return {
    model: typeof body.model === 'string' ? body.model : '',
    stream: body.stream === true,
    store: body.store !== false,
    background: body.background === true,
    instructions: typeof body.instructions === 'string' ? body.instructions : null,
    previousResponseId: typeof body.previous_response_id === 'string' ? body.previous_response_id : null,
    maxOutputTokens: typeof mot === 'number' ? mot : null,
    ignoreEos: body.ignore_eos === true,
    input: body.input,
  };
}

export function createResponse(ctx: HandlerContext, store: ResponsesStore, req: IncomingMessage, res: ServerResponse, rawBody: string, fault: FaultSpec): void {
  if (fault.mode === 'hang') return;
  if (fault.mode === 'error_before_first_token') {
    const type = fault.status === 503 ? ErrorType.ServiceUnavailable : fault.status >= 500 ? ErrorType.Internal : ErrorType.BadRequest;
    return sendError(res, new VllmError(fault.status, type, 'mock fault: error_before_first_token'));
  }
  const r = parse(rawBody);
  if (r instanceof VllmError) return sendError(res, r);
  let adapter: string | null = null;
  let model = ctx.modelName;
  if (r.model !== '' && r.model !== ctx.modelName) {
    if (!ctx.adapters.has(r.model)) return sendError(res, modelNotFound(r.model));
    adapter = model = r.model;
  }
  if (r.background && !r.store) return sendError(res, new VllmError(400, ErrorType.InvalidRequest, 'background can only be used when `store` is true'));
  if (r.background && r.stream) return sendError(res, badRequest('the mock replica does not serve streamed background responses'));
  let previous: Stored | null = null;
  if (r.previousResponseId !== null) {
    previous = store.get(r.previousResponseId) ?? null;
    if (previous === null) return sendError(res, notFound(r.previousResponseId));
  }
  const input = parseResponsesInput(r.input);
  if (!Array.isArray(input)) return sendError(res, badRequest(`${input.param}: ${input.message}`));
  const messages = responsesMessages(r.instructions, previous?.turn ?? null, input);
  let prompt: PromptTokens;
  try {
    prompt = promptTokens({
      kind: 'chat', model, stream: false, includeUsage: false, continuousUsage: false, maxTokens: null, ignoreEos: false, seed: null,
      messages, tools: null, addGenerationPrompt: true, prompt: '',
    }, ctx.blockSize, adapter);
  } catch (err) {
    if (err instanceof ChatTemplateError) return sendError(res, badRequest(err.message));
    throw err;
  }
  const promptLen = prompt.tokens.length;
  if (promptLen >= ctx.maxModelLen) {
    return sendError(res, new VllmError(400, ErrorType.InvalidRequest, `The engine prompt length ${promptLen} exceeds the max_model_len ${ctx.maxModelLen}. Please reduce prompt.`));
  }
  if (r.maxOutputTokens !== null && (r.maxOutputTokens < 1 || promptLen + r.maxOutputTokens > ctx.maxModelLen)) {
    return sendError(res, badRequest(`'max_output_tokens' is too large: ${r.maxOutputTokens}. This model's maximum context length is ${ctx.maxModelLen} tokens and your request has ${promptLen} input tokens.`));
  }
  const maxTokens = r.maxOutputTokens ?? Math.min(ctx.maxModelLen - promptLen, DEFAULT_MAX_TOKENS_CAP);
  const plan = planOutput(maxTokens, r.ignoreEos, hashTokens(prompt.tokens), ctx.replicaSeed, true);
  const echo: ResponseEcho = {
    id: `resp_${hex32()}`, createdAt: Math.floor(Date.now() / 1000), model, instructions: r.instructions, maxOutputTokens: maxTokens,
    previousResponseId: r.previousResponseId, background: r.background,
  };
  const itemId = `msg_${hex32()}`;
  const engineId = echo.id;
  const counts: ResponsesUsage = { inputTokens: promptLen, outputTokens: 0, cachedTokens: 0 };
  const dieAfter = fault.mode === 'die_mid_stream' ? fault.after_tokens : -1;
  let finished = false;
  const abortEngine = (): void => {
    if (!finished) ctx.engine.abort(engineId);
  };
  /** The final response; stored (unless store is false, or a cancel got there first) and returned. */
  const complete = (): Record<string, unknown> => {
    const text = fullText(plan, counts.outputTokens);
    const output = text === '' && counts.outputTokens === 0 ? [] : [outputMessage(itemId, text)];
    const final = responseObject(echo, 'completed', output, counts);
    const held = store.get(echo.id);
    if (held !== undefined && held.response.status === 'cancelled') return held.response;
    if (r.store) store.put(echo.id, { response: final, turn: { messages, outputTexts: output.length > 0 ? [text] : [] }, engineId: null });
    return final;
  };
  const base = {
    onFirstToken({ cachedTokens }: { cachedTokens: number }) {
      counts.cachedTokens = cachedTokens;
    },
    onToken(index: number) {
      counts.outputTokens = index + 1;
    },
  };
  let events: EngineRequestEvents;
  const ev = new ResponseEvents(itemId);
  if (r.background) {
    events = {
      ...base,
      onFinish(reason) {
        finished = true;
        if (reason !== 'abort') complete();
      },
    };
    store.put(echo.id, { response: responseObject(echo, 'queued', [], null), turn: { messages, outputTexts: [] }, engineId });
  } else if (r.stream) {
    const writer = new FrameWriter(res, dieAfter, abortEngine);
    res.on('close', abortEngine);
    events = {
      onFirstToken(info) {
        base.onFirstToken(info);
        writer.other(ev.itemAdded());
      },
      onToken(index) {
        base.onToken(index);
        writer.token(ev.delta(tokenText(plan, index)));
      },
      onFinish(reason) {
        finished = true;
        if (writer.closed) return;
        if (reason === 'abort') return writer.finish(`event: error\ndata: ${JSON.stringify({ error: { message: 'Request aborted by the engine', type: ErrorType.Internal, param: null, code: 500 } })}\n\n`);
        writer.finish(ev.closing(fullText(plan, counts.outputTokens), complete()));
      },
    };
  } else {
    res.on('close', abortEngine);
    events = {
      ...base,
      onFinish(reason) {
        finished = true;
        if (res.destroyed) return;
        if (reason === 'abort') return sendError(res, new VllmError(500, ErrorType.Internal, 'Request aborted by the engine'));
        sendJson(res, 200, JSON.stringify(complete()));
      },
    };
  }
  if (!r.background && req.socket.destroyed) return;
  ctx.engine.add({
    id: engineId, promptTokens: promptLen, blockHashes: prompt.blockHashes, outputTokens: plan.outputTokens, finishReason: plan.finishReason, adapter,
    outputBlockHashes: outputBlockHashes(prompt, plan, ctx.blockSize, adapter),
    tokenIds: ctx.kvEvents === true ? sequenceTokenIds(prompt, plan) : undefined,
    tokenDelayMs: fault.mode === 'slow' ? fault.delay_ms : 0,
  }, events);
  ctx.metrics.observeMaxTokens(maxTokens);
  if (r.background) return sendJson(res, 200, JSON.stringify(store.get(echo.id)!.response));
  if (r.stream) {
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8' });
    res.write(ev.opening(responseObject(echo, 'in_progress', [], null)));
  }
}

/** GET /v1/responses/{id}. */
export function retrieveResponse(store: ResponsesStore, id: string, res: ServerResponse): void {
  const s = store.get(id);
  if (s === undefined) return sendError(res, notFound(id));
  sendJson(res, 200, JSON.stringify(s.response));
}

/** POST /v1/responses/{id}/cancel: only a background response still queued or running can be cancelled. */
export function cancelResponse(ctx: HandlerContext, store: ResponsesStore, id: string, res: ServerResponse): void {
  const s = store.get(id);
  if (s === undefined) return sendError(res, notFound(id));
  const status = s.response.status as ResponseStatus;
  if (status !== 'queued' && status !== 'in_progress') return sendError(res, new VllmError(400, ErrorType.InvalidRequest, 'Cannot cancel a synchronous response.'));
  s.response = { ...s.response, status: 'cancelled' };
  if (s.engineId !== null) ctx.engine.abort(s.engineId);
  s.engineId = null;
  sendJson(res, 200, JSON.stringify(s.response));
}
