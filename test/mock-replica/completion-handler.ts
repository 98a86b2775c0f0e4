// The life of one completion request on the mock: validate → model check → tokenize → context check →
// engine.add → frames at the engine's step ends → usage → [DONE]; a socket close before the end aborts the
// engine request at once. Thread: main (mock process). Hot path of the mock (per token: one frame build and
// one socket write).
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { ChatTemplateError } from '../../src/tokenize/chat-template.ts';
import { parseCompletionRequest, type CompletionKind } from './completion-request.ts';
import type { EngineRequestEvents, EngineSnapshot, EngineRequestSpec } from './engine/types.ts';
import type { FaultSpec } from './faults.ts';
import { fullText, hashTokens, planOutput, tokenText } from './output-text.ts';
import { FrameWriter } from './frame-writer.ts';
import { promptTokens, type PromptTokens } from './prompt-tokens.ts';
import { outputBlockHashes, sequenceTokenIds } from './reply-hashes.ts';
import type { ReplicaMetrics } from './replica-metrics.ts';
import { DONE_FRAME, StreamFrames, completionId, errorFrame, fullResponseBody } from './sse-frames.ts';
import { ErrorType, VllmError, badRequest, maxTokensTooLarge, modelNotFound, promptTooLong } from './vllm-errors.ts';

/** max_tokens when the client sends none: max_model_len − prompt_len, capped here (vLLM caps by generation config). */
export const DEFAULT_MAX_TOKENS_CAP = 4096;

/** Llama 3's vocabulary (128,000 ordinary + 256 special ids): a token-id prompt beyond it is a 400, as in vLLM. */
const LLAMA3_VOCAB_SIZE = 128256;

/** What the handler needs from the engine (structural, so the interim and the real MockEngine both fit). */
export interface EnginePort {
  add(spec: EngineRequestSpec, events: EngineRequestEvents): void;
  abort(id: string): unknown;
  snapshot(): EngineSnapshot;
}

export interface HandlerContext {
  modelName: string;
  maxModelLen: number;
  blockSize: number;
  replicaSeed: number;
  engine: EnginePort;
  metrics: ReplicaMetrics;
  /** Loaded adapter names (mirrors the engine's; kept here so a model check costs a Set lookup). */
  adapters: ReadonlySet<string>;
  /** Ids of requests in the engine right now, so a reused X-Request-Id does not collide. */
  activeIds: Set<string>;
  /** A KV-event publisher listens: engine specs carry the sequence's token ids. */
  kvEvents?: boolean;
}

export function sendJson(res: ServerResponse, status: number, body: string): void {
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

export function sendError(res: ServerResponse, e: VllmError): void {
  sendJson(res, e.status, JSON.stringify({ error: { message: e.message, type: e.type, param: null, code: e.status } }));
}

/** The completion id's base: the client's X-Request-Id, else 16 random hex digits (2026 builds). */
function requestBase(req: IncomingMessage): string {
  const header = req.headers['x-request-id'];
  // randomUUID draws from a cached entropy pool; randomBytes(8) was a syscall per request in the profile.
  return typeof header === 'string' && header !== '' ? header : randomUUID().replace(/-/g, '').slice(0, 16);
}

/** The engine id: the base, suffixed when a request with the same X-Request-Id is still in the engine. */
function engineId(base: string, activeIds: Set<string>): string {
  if (!activeIds.has(base)) return base;
  let n = 1;
  while (activeIds.has(`${base}-${n}`)) n++;
  return `${base}-${n}`;
}

export function handleCompletion(ctx: HandlerContext, kind: CompletionKind, req: IncomingMessage, res: ServerResponse, rawBody: string, fault: FaultSpec): void {
  if (fault.mode === 'hang') return; // accepted, never a byte; the socket stays open until the client leaves
  if (fault.mode === 'error_before_first_token') {
    const type = fault.status === 503 ? ErrorType.ServiceUnavailable : fault.status >= 500 ? ErrorType.Internal : ErrorType.BadRequest;
    sendError(res, new VllmError(fault.status, type, 'mock fault: error_before_first_token'));
    return;
  }
  const parsed = parseCompletionRequest(kind, rawBody);
  if (parsed instanceof VllmError) return sendError(res, parsed);

  let adapter: string | null = null;
  let model = ctx.modelName;
  if (parsed.model !== '' && parsed.model !== ctx.modelName) {
    if (!ctx.adapters.has(parsed.model)) return sendError(res, modelNotFound(parsed.model));
    adapter = parsed.model;
    model = parsed.model;
  }

  if (Array.isArray(parsed.prompt)) {
    let maxId = 0;
    let minId = 0;
    for (const t of parsed.prompt) {
      if (t > maxId) maxId = t;
      if (t < minId) minId = t;
    }
    if (maxId >= LLAMA3_VOCAB_SIZE || minId < 0) return sendError(res, badRequest(`Token id ${minId < 0 ? minId : maxId} is out of vocabulary`));
  }
  let prompt: PromptTokens;
  try {
    prompt = promptTokens(parsed, ctx.blockSize, adapter);
  } catch (err) {
    // vLLM answers template errors with a 400 BadRequestError carrying the template's message.
    if (err instanceof ChatTemplateError) return sendError(res, badRequest(err.message));
    throw err;
  }
  const promptLen = prompt.tokens.length;
  if (promptLen >= ctx.maxModelLen) return sendError(res, promptTooLong(ctx.maxModelLen, promptLen));
  if (parsed.maxTokens !== null && promptLen + parsed.maxTokens > ctx.maxModelLen) {
    return sendError(res, maxTokensTooLarge(ctx.maxModelLen, promptLen, parsed.maxTokens));
  }
  const maxTokens = parsed.maxTokens ?? Math.min(ctx.maxModelLen - promptLen, DEFAULT_MAX_TOKENS_CAP);
  const plan = planOutput(maxTokens, parsed.ignoreEos, parsed.seed ?? hashTokens(prompt.tokens), ctx.replicaSeed, kind === 'chat');

  const requestId = requestBase(req);
  const id = completionId(kind, requestId);
  const base = engineId(requestId, ctx.activeIds);
  const createdSeconds = Math.floor(Date.now() / 1000);
  const times = { cachedTokens: 0, generatedTokens: 0 };
  let finished = false;
  const dieAfter = fault.mode === 'die_mid_stream' ? fault.after_tokens : -1;

  const abortEngine = (): void => {
    if (!finished) ctx.engine.abort(base);
  };
  res.on('close', abortEngine);

  // Latency histograms and token counters live in the engine (same timestamps as the frames below).
  const common = {
    onFinishStats(_reason: 'stop' | 'length' | 'abort'): void {
      finished = true;
      ctx.activeIds.delete(base);
    },
    onFirst(cachedTokens: number): void {
      times.cachedTokens = cachedTokens;
    },
    onTok(index: number): void {
      times.generatedTokens = index + 1;
    },
  };

  let events: EngineRequestEvents;
  if (parsed.stream) {
    const frames = new StreamFrames(kind, id, createdSeconds, model, parsed.continuousUsage, promptLen);
    const writer = new FrameWriter(res, dieAfter, abortEngine);
    events = {
      onFirstToken({ cachedTokens }) {
        common.onFirst(cachedTokens);
        if (kind === 'chat') writer.other(frames.role());
      },
      onToken(index) {
        common.onTok(index);
        const text = tokenText(plan, index);
        writer.token(index === plan.outputTokens - 1 ? frames.last(text, index + 1, plan.finishReason) : frames.token(text, index + 1));
      },
      onFinish(reason) {
        common.onFinishStats(reason);
        if (writer.closed) return;
        if (reason === 'abort') {
          writer.finish(errorFrame(500, ErrorType.Internal, 'Request aborted by the engine'));
          return;
        }
        const usage = parsed.includeUsage ? frames.usage({ promptTokens: promptLen, completionTokens: times.generatedTokens, cachedTokens: times.cachedTokens }) : '';
        writer.finish(usage + DONE_FRAME);
      },
    };
  } else {
    events = {
      onFirstToken({ cachedTokens }) {
        common.onFirst(cachedTokens);
      },
      onToken(index) {
        common.onTok(index);
        if (dieAfter >= 0 && index + 1 >= dieAfter) {
          res.destroy(); // first, so the abort's onFinish finds the socket gone and sends nothing
          abortEngine();
        }
      },
      onFinish(reason) {
        common.onFinishStats(reason);
        if (res.destroyed) return;
        if (reason === 'abort') return sendError(res, new VllmError(500, ErrorType.Internal, 'Request aborted by the engine'));
        if (dieAfter >= 0) {
          res.destroy();
          return;
        }
        const body = fullResponseBody({
          kind, id, createdSeconds, model, text: fullText(plan, times.generatedTokens), finishReason: plan.finishReason,
          usage: { promptTokens: promptLen, completionTokens: times.generatedTokens, cachedTokens: times.cachedTokens },
        });
        sendJson(res, 200, body);
      },
    };
  }
  // The client may have left while its body was read and tokenized: its 'close' has fired already.
  if (req.socket.destroyed) return;
  // Engine events fire only at step ends (timers), never inside add(), so the headers below still go first.
  ctx.engine.add({
    id: base, promptTokens: promptLen, blockHashes: prompt.blockHashes, outputTokens: plan.outputTokens, finishReason: plan.finishReason, adapter,
    outputBlockHashes: outputBlockHashes(prompt, plan, ctx.blockSize, adapter),
    tokenIds: ctx.kvEvents === true ? sequenceTokenIds(prompt, plan) : undefined,
    tokenDelayMs: fault.mode === 'slow' ? fault.delay_ms : 0,
  }, events);
  ctx.activeIds.add(base);
  ctx.metrics.observeMaxTokens(maxTokens);
  if (parsed.stream) {
    // vLLM sends 200 and the headers as soon as the handler returns its generator: before prefill.
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8' });
    res.flushHeaders();
  }
}
