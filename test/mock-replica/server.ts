// The mock vLLM replica's HTTP server (node:http, playing uvicorn): route table, body reading, fault gating,
// and the small routes (/v1/models, /health, /metrics, LoRA load/unload, /tokenize, /_mock/*).
// Completion requests go to completion-handler.ts. Thread: main (mock process). Hot path of the mock for
// completions; the other routes are per poll.
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ChatTemplateError } from '../../src/tokenize/chat-template.ts';
import { handleCompletion, sendError, sendJson, type HandlerContext } from './completion-handler.ts';
import type { CompletionRequest } from './completion-request.ts';
import { FaultState } from './faults.ts';
import { RealClock } from './engine/clocks.ts';
import { MockEngine } from './engine/engine.ts';
import { DEFAULT_MODEL, type MockOptions } from './options.ts';
import { KvEventPublisher } from './kv-events/publisher.ts';
import { initPromptTokens, promptTokens } from './prompt-tokens.ts';
import { ReplicaMetrics } from './replica-metrics.ts';
import { ResponsesStore, cancelResponse, createResponse, retrieveResponse } from './responses-handler.ts';
import { ErrorType, VllmError, badRequest } from './vllm-errors.ts';

export type { MockOptions } from './options.ts';
export { MockEngine } from './engine/engine.ts';

export interface MockReplica {
  url: string;
  port: number;
  engine: MockEngine;
  /** The KV-event publisher (`kvEvents` option), else null. */
  kvEvents: KvEventPublisher | null;
  close(): Promise<void>;
}

const RESPONSES_PREFIX = '/v1/responses/';
const MAX_BODY_BYTES = 64 * 1024 * 1024;
/** uvicorn's TIMEOUT_KEEP_ALIVE: idle connections close after 5 s (docs/vllm-facts.md "Wire format"). */
const KEEP_ALIVE_TIMEOUT_MS = 5000;
const VLLM_VERSION = '0.11.0';

function readBody(req: IncomingMessage): Promise<string | null> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY_BYTES) {
        resolve(null);
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', () => resolve(null));
    // A client that leaves mid-body: 'end' never comes (resolving twice is a no-op after 'end').
    req.on('close', () => {
      if (!req.complete) resolve(null);
    });
  });
}

function detail(res: ServerResponse, status: number, message: string): void {
  sendJson(res, status, JSON.stringify({ detail: message }));
}

function isJsonRequest(req: IncomingMessage): boolean {
  const ct = (req.headers['content-type'] ?? '').toLowerCase();
  return ct.split(';', 1)[0]!.trim() === 'application/json';
}

function parseJsonObject(raw: string): Record<string, unknown> | null {
  try {
    const v: unknown = JSON.parse(raw);
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

export async function startMockReplica(opts: MockOptions): Promise<MockReplica> {
  await initPromptTokens(opts.tokenizer, opts.tokenizerImpl ?? 'gateway');
  const modelName = opts.model ?? DEFAULT_MODEL;
  const engine = new MockEngine(opts, new RealClock());
  const { blockSize, numGpuBlocks } = engine.config;
  // vLLM refuses to start when max_model_len does not fit the KV pool; so does the mock.
  const maxModelLen = opts.maxModelLen ?? engine.config.maxModelLen;
  if (maxModelLen > engine.config.maxModelLen) {
    engine.close();
    throw new Error(`max_model_len ${maxModelLen} exceeds what profile ${opts.profile} with ${numGpuBlocks} blocks accepts (${engine.config.maxModelLen} tokens)`);
  }
  const adapterPaths = new Map<string, string>();
  for (const name of opts.loras ?? []) adapterPaths.set(name, `/adapters/${name}`);
  const adapters = new Set(adapterPaths.keys());
  const loraEnabled = opts.enableLora ?? (opts.maxLoras !== undefined || adapters.size > 0);
  const metrics = new ReplicaMetrics({
    modelName,
    maxModelLen,
    blockSize,
    numGpuBlocks,
    loraEnabled,
    legacyMetrics: opts.legacyMetrics ?? false,
  });
  let kvEvents: KvEventPublisher | null = null;
  if (opts.kvEvents !== undefined) {
    try {
      kvEvents = await KvEventPublisher.start(opts.kvEvents, blockSize);
    } catch (err) {
      engine.close();
      throw new Error(`cannot bind the KV-event publisher at ${opts.kvEvents}: ${(err as Error).message}`);
    }
    engine.setBlockEvents(kvEvents);
  }
  const faults = new FaultState();
  const responses = new ResponsesStore();
  const createdSeconds = Math.floor(Date.now() / 1000);
  const ctx: HandlerContext = {
    modelName,
    maxModelLen,
    blockSize,
    replicaSeed: opts.seed ?? 0,
    engine,
    metrics,
    adapters,
    activeIds: new Set(),
    kvEvents: kvEvents !== null,
  };

  const modelCard = (id: string, root: string, parent: string | null, maxLen: number | null): Record<string, unknown> => ({
    id, object: 'model', created: createdSeconds, owned_by: 'vllm', root, parent, max_model_len: maxLen,
    permission: [{
      id: `modelperm-${randomBytes(16).toString('hex')}`, object: 'model_permission', created: createdSeconds,
      allow_create_engine: false, allow_sampling: true, allow_logprobs: true, allow_search_indices: false,
      allow_view: true, allow_fine_tuning: false, organization: '*', group: null, is_blocking: false,
    }],
  });

  async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?', 1)[0]!;
    const method = req.method ?? 'GET';

    if (path.startsWith('/_mock/')) return mockHook(path, method, req, res);

    const isV1 = path.startsWith('/v1/');
    const isCompletion = method === 'POST' && (path === '/v1/chat/completions' || path === '/v1/completions' || path === '/v1/responses');
    const fault = isCompletion ? faults.takeForCompletion() : faults.current();
    if (isV1 && fault.mode === 'refuse_connections') {
      req.socket.destroy();
      return;
    }
    if (fault.mode === 'unhealthy' && (isV1 || path === '/health' || path === '/ping')) {
      if (isV1) sendError(res, new VllmError(503, ErrorType.ServiceUnavailable, 'mock fault: unhealthy'));
      else {
        res.writeHead(503, { 'content-length': 0 });
        res.end();
      }
      return;
    }

    if (isCompletion) {
      if (!isJsonRequest(req)) return detail(res, 415, "Unsupported Media Type: Only 'application/json' is allowed");
      const body = await readBody(req);
      if (body === null) return;
      if (path === '/v1/responses') createResponse(ctx, responses, req, res, body, fault);
      else handleCompletion(ctx, path === '/v1/chat/completions' ? 'chat' : 'completion', req, res, body, fault);
      return;
    }
    if (path.startsWith(RESPONSES_PREFIX)) return storedResponse(path.slice(RESPONSES_PREFIX.length), method, res);
    const key = `${method} ${path}`;
    switch (key) {
      case 'GET /health':
      case 'GET /ping':
      case 'POST /ping':
        res.writeHead(200, { 'content-length': 0 });
        res.end();
        return;
      case 'GET /version':
        return sendJson(res, 200, JSON.stringify({ version: VLLM_VERSION }));
      case 'GET /metrics': {
        const body = metrics.page(engine);
        res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8', 'content-length': body.length });
        res.end(body);
        return;
      }
      case 'GET /v1/models': {
        const data = [modelCard(modelName, modelName, null, maxModelLen)];
        for (const [name, p] of adapterPaths) data.push(modelCard(name, p, modelName, null));
        return sendJson(res, 200, JSON.stringify({ object: 'list', data }));
      }
      case 'POST /v1/load_lora_adapter':
      case 'POST /v1/unload_lora_adapter':
      case 'POST /tokenize': {
        if (!isJsonRequest(req)) return detail(res, 415, "Unsupported Media Type: Only 'application/json' is allowed");
        const raw = await readBody(req);
        if (raw === null) return;
        const body = parseJsonObject(raw);
        if (body === null) return sendError(res, badRequest("[{'type': 'json_invalid', 'loc': ('body', 0), 'msg': 'JSON decode error'}]"));
        if (path === '/tokenize') return tokenize(body, res);
        return path === '/v1/load_lora_adapter' ? loadLora(body, res) : unloadLora(body, res);
      }
      default:
        if (['/health', '/ping', '/version', '/metrics', '/v1/models', '/v1/load_lora_adapter', '/v1/unload_lora_adapter', '/tokenize', '/v1/chat/completions', '/v1/completions', '/v1/responses'].includes(path)) {
          return detail(res, 405, 'Method Not Allowed');
        }
        return detail(res, 404, 'Not Found');
    }
  }

  /** GET /v1/responses/{id} and POST /v1/responses/{id}/cancel. */
  function storedResponse(rest: string, method: string, res: ServerResponse): void {
    const cancel = rest.endsWith('/cancel');
    const id = cancel ? rest.slice(0, -'/cancel'.length) : rest;
    if (id === '' || id.includes('/')) return detail(res, 404, 'Not Found');
    if (method !== (cancel ? 'POST' : 'GET')) return detail(res, 405, 'Method Not Allowed');
    if (cancel) return cancelResponse(ctx, responses, id, res);
    retrieveResponse(responses, id, res);
  }

  function textOk(res: ServerResponse, text: string): void {
    res.writeHead(200, { 'content-length': Buffer.byteLength(text) });
    res.end(text);
  }

  function loadLora(body: Record<string, unknown>, res: ServerResponse): void {
    const name = body.lora_name;
    const p = body.lora_path;
    if (typeof name !== 'string' || name === '' || typeof p !== 'string' || p === '') {
      return sendJson(res, 400, JSON.stringify({ error: { message: "Both 'lora_name' and 'lora_path' must be provided.", type: 'InvalidUserInput', param: null, code: 400 } }));
    }
    if (adapterPaths.has(name) && body.load_inplace !== true) {
      return sendJson(res, 400, JSON.stringify({ error: { message: `The lora adapter '${name}' has already been loaded.`, type: 'InvalidUserInput', param: null, code: 400 } }));
    }
    adapterPaths.set(name, p);
    adapters.add(name);
    engine.loadAdapter(name);
    textOk(res, `Success: LoRA adapter '${name}' added successfully.`);
  }

  function unloadLora(body: Record<string, unknown>, res: ServerResponse): void {
    const name = body.lora_name;
    if (typeof name !== 'string' || name === '') {
      return sendJson(res, 400, JSON.stringify({ error: { message: "'lora_name' needs to be provided to unload a LoRA adapter.", type: 'InvalidUserInput', param: null, code: 400 } }));
    }
    if (!adapterPaths.has(name)) {
      return sendJson(res, 404, JSON.stringify({ error: { message: `The lora adapter '${name}' cannot be found.`, type: 'NotFoundError', param: null, code: 404 } }));
    }
    adapterPaths.delete(name);
    adapters.delete(name);
    engine.unloadAdapter(name);
    textOk(res, `Success: LoRA adapter '${name}' removed successfully.`);
  }

  function tokenize(body: Record<string, unknown>, res: ServerResponse): void {
    const isChat = Array.isArray(body.messages);
    const req: CompletionRequest = {
      kind: isChat ? 'chat' : 'completion', model: '', stream: false, includeUsage: false, continuousUsage: false,
      maxTokens: null, ignoreEos: false, seed: null, tools: null,
      messages: isChat ? (body.messages as Array<{ role: string; content: string }>).map((m) => ({ role: String(m.role), content: String(m.content ?? '') })) : [],
      addGenerationPrompt: body.add_generation_prompt !== false,
      prompt: typeof body.prompt === 'string' ? body.prompt : '',
    };
    let tokens: Uint32Array;
    try {
      tokens = promptTokens(req, blockSize, null).tokens;
    } catch (err) {
      if (err instanceof ChatTemplateError) return sendError(res, badRequest(err.message));
      throw err;
    }
    sendJson(res, 200, JSON.stringify({ count: tokens.length, max_model_len: maxModelLen, tokens: Array.from(tokens), token_strs: null }));
  }

  async function mockHook(path: string, method: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (path === '/_mock/state' && method === 'GET') return sendJson(res, 200, JSON.stringify(engine.snapshot()));
    if (path === '/_mock/faults' && method === 'GET') return sendJson(res, 200, JSON.stringify(faults.current()));
    if (path === '/_mock/faults' && method === 'POST') {
      const raw = await readBody(req);
      if (raw === null) return;
      let parsed: unknown;
      try {
        parsed = JSON.parse(raw);
      } catch {
        return sendError(res, badRequest('body is not JSON'));
      }
      const err = faults.set(parsed);
      if (err !== null) return sendError(res, badRequest(err));
      return sendJson(res, 200, JSON.stringify(faults.current()));
    }
    if (path === '/_mock/kv_events') return kvEventsHook(method, req, res);
    return detail(res, 404, 'Not Found');
  }

  /**
   * GET: the publisher's state; POST {"skip": N} withholds the next N batches, {"publisher": "stop"|"start"} closes / rebinds it,
   * {"withhold_removed": true|false} leaves BlockRemoved out of published batches (not of the replay buffer).
   */
  async function kvEventsHook(method: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const state = (p: KvEventPublisher): string => JSON.stringify({
      endpoint: p.endpoint, replay_endpoint: p.replayEndpoint, publishing: p.publishing, batches: p.batches, skip: p.skip,
      withhold_removed: p.withholdRemoved,
    });
    if (kvEvents === null) return detail(res, 404, 'KV events are off (start with --kv-events tcp://HOST:PORT)');
    if (method === 'GET') return sendJson(res, 200, state(kvEvents));
    if (method !== 'POST') return detail(res, 405, 'Method Not Allowed');
    const raw = await readBody(req);
    if (raw === null) return;
    const body = parseJsonObject(raw);
    if (body === null) return sendError(res, badRequest('body is not a JSON object'));
    const { skip, publisher, withhold_removed: withhold } = body;
    if (withhold !== undefined && typeof withhold !== 'boolean') return sendError(res, badRequest('withhold_removed must be true or false'));
    if (skip !== undefined && !(Number.isInteger(skip) && (skip as number) >= 0)) return sendError(res, badRequest('skip must be an integer >= 0'));
    if (publisher !== undefined && publisher !== 'stop' && publisher !== 'start') return sendError(res, badRequest('publisher must be "stop" or "start"'));
    if (skip !== undefined) kvEvents.skip = skip as number;
    if (withhold !== undefined) kvEvents.withholdRemoved = withhold;
    if (publisher === 'stop') await kvEvents.close();
    if (publisher === 'start') await kvEvents.open();
    return sendJson(res, 200, state(kvEvents));
  }

  const server = createServer({ keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS }, (req, res) => {
    res.setHeader('server', 'uvicorn');
    route(req, res).catch((err: unknown) => {
      if (!res.headersSent) sendError(res, new VllmError(500, ErrorType.Internal, String(err)));
      else res.destroy();
    });
  });
  server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, opts.host ?? '127.0.0.1', () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  const host = opts.host ?? '127.0.0.1';
  const urlHost = host.includes(':') ? `[${host}]` : host === '0.0.0.0' ? '127.0.0.1' : host;
  return {
    url: `http://${urlHost}:${port}`,
    port,
    engine,
    kvEvents,
    close: async () => {
      engine.close();
      await kvEvents?.close();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}
