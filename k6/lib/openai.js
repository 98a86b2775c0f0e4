// OpenAI-style client for k6 scenarios against the gateway: request builders, SSE parsing and checks, and the
// custom metrics every scenario shares (ttft, inter_token_latency, stream_ok, stream_error_events).
// Runs inside k6 VUs (goja JS, not Node). k6's http module buffers the whole body, so timings come from
// res.timings: `waiting` is the time to the first response byte. The gateway sends its 200 together with the
// first token (it may still retry on another replica before that), so through the gateway `waiting` is the
// time to first token; straight to a vLLM replica the headers leave before prefill and it undercounts.
// inter_token_latency is per request: `receiving` / (content frames - 1), the mean gap between tokens.
import http from 'k6/http';
import { check } from 'k6';
import { Counter, Rate, Trend } from 'k6/metrics';

/** Knobs from the environment, with the demo's defaults (`npm run demo`). */
export const env = {
  gatewayUrl: (__ENV.GATEWAY_URL || 'http://127.0.0.1:8080').replace(/\/+$/, ''),
  model: __ENV.MODEL || 'llama-3.1-8b-instruct',
  apiKey: __ENV.API_KEY || 'sk-demo-alpha',
  vus: Number(__ENV.VUS || 10),
  duration: __ENV.DURATION || '60s',
  maxTokens: Number(__ENV.MAX_TOKENS || 64),
};

export const ttft = new Trend('ttft', true);
export const interTokenLatency = new Trend('inter_token_latency', true);
/** 1 per stream that ended with `data: [DONE]`, had no error event and the expected frames. */
export const streamOk = new Rate('stream_ok');
/** Streams that ended with a `data: {"error":…}` event (a failure after the first byte). */
export const streamErrorEvents = new Counter('stream_error_events');

/**
 * @typedef {{ role: string, content: string }} ChatMessage
 * @typedef {{ prompt?: string, messages?: ChatMessage[], maxTokens?: number, stream?: boolean,
 *   includeUsage?: boolean, ignoreEos?: boolean, apiKey?: string, model?: string, timeout?: string,
 *   tags?: { [name: string]: string } }} ChatOptions
 * @typedef {{ frames: number, contentFrames: number, done: boolean, error: { code?: string | null, message?: string } | null,
 *   usage: { prompt_tokens: number, completion_tokens: number } | null, text: string }} SseSummary
 */

let counter = 0;
/** A short prompt that varies per VU and iteration, so prefix caches see realistic (not identical) traffic. */
export function prompt() {
  counter++;
  return `User ${__VU} request ${counter}: summarise the benefits of unit tests in two sentences.`;
}

/** @param {ChatOptions} o */
export function chatRequestBody(o) {
  /** @type {{ [k: string]: unknown }} */
  const body = {
    model: o.model || env.model,
    messages: o.messages || [{ role: 'user', content: o.prompt || prompt() }],
    max_tokens: o.maxTokens || env.maxTokens,
    stream: Boolean(o.stream),
  };
  if (o.ignoreEos) body.ignore_eos = true;
  if (o.stream && o.includeUsage) body.stream_options = { include_usage: true };
  return JSON.stringify(body);
}

/** @param {ChatOptions} o */
export function chatParams(o) {
  return {
    headers: {
      'content-type': 'application/json',
      authorization: `Bearer ${o.apiKey || env.apiKey}`,
    },
    timeout: o.timeout || '120s',
    tags: Object.assign({ kind: 'completion', stream: String(Boolean(o.stream)) }, o.tags || {}),
  };
}

/**
 * Splits an SSE body into frames and summarises it. Tolerates `\r\n`; ignores comment lines.
 * @param {string} body
 * @returns {SseSummary}
 */
export function parseSse(body) {
  /** @type {SseSummary} */
  const out = { frames: 0, contentFrames: 0, done: false, error: null, usage: null, text: '' };
  const frames = body.replace(/\r\n/g, '\n').split('\n\n');
  for (const frame of frames) {
    const line = frame.split('\n').find((l) => l.startsWith('data:'));
    if (line === undefined) continue;
    out.frames++;
    const data = line.slice(5).trim();
    if (data === '[DONE]') { out.done = true; continue; }
    /** @type {any} */
    let chunk;
    try { chunk = JSON.parse(data); } catch (_e) { continue; }
    if (chunk.error) { out.error = chunk.error; continue; }
    if (chunk.usage) out.usage = chunk.usage;
    const choice = chunk.choices && chunk.choices[0];
    if (!choice) continue;
    const piece = choice.delta ? choice.delta.content : choice.text;
    // Role chunk has content "" and carries no token; every other choice chunk carries one engine step.
    if (typeof piece === 'string' && (piece.length > 0 || choice.finish_reason)) {
      out.contentFrames++;
      out.text += piece;
    }
  }
  return out;
}

/**
 * Non-streaming chat completion with checks on status and shape.
 * @param {ChatOptions} o
 */
export function chat(o) {
  const params = chatParams(Object.assign({}, o, { stream: false }));
  const res = http.post(`${env.gatewayUrl}/v1/chat/completions`, chatRequestBody(Object.assign({}, o, { stream: false })), params);
  // Checks carry the request's tags, so thresholds such as checks{kind:completion} see them.
  check(res, {
    'chat: status 200': (r) => r.status === 200,
    'chat: has a choice': (r) => r.status !== 200 || hasChoice(r.body),
    'chat: has x-request-id': (r) => Boolean(r.headers['X-Request-Id']),
  }, params.tags);
  return res;
}

/** @param {unknown} body */
function hasChoice(body) {
  try {
    /** @type {any} */
    const j = JSON.parse(String(body));
    return Array.isArray(j.choices) && j.choices.length > 0;
  } catch (_e) {
    return false;
  }
}

/**
 * Streaming chat completion: records ttft and inter_token_latency, checks the SSE framing.
 * With `ignoreEos`, the stream must carry exactly `maxTokens` tokens (by usage or by frame count).
 * @param {ChatOptions} o
 */
export function chatStream(o) {
  const opts = Object.assign({ includeUsage: true }, o, { stream: true });
  const params = chatParams(opts);
  const res = http.post(`${env.gatewayUrl}/v1/chat/completions`, chatRequestBody(opts), params);
  const sse = res.status === 200 ? parseSse(String(res.body)) : null;
  const wantTokens = opts.ignoreEos ? (opts.maxTokens || env.maxTokens) : 0;
  const ok = check(res, {
    'stream: status 200': (r) => r.status === 200,
    'stream: content-type text/event-stream': (r) => r.status !== 200 || String(r.headers['Content-Type']).startsWith('text/event-stream'),
    'stream: ends with data: [DONE]': () => sse === null || sse.done,
    'stream: no error event': () => sse === null || sse.error === null,
    'stream: usage chunk present': () => sse === null || !opts.includeUsage || sse.usage !== null,
    'stream: expected token count': () => sse === null || wantTokens === 0
      || (sse.usage ? sse.usage.completion_tokens === wantTokens : sse.contentFrames === wantTokens),
  }, params.tags);
  if (sse !== null) {
    streamOk.add(ok, params.tags);
    if (sse.error !== null) streamErrorEvents.add(1, { code: String(sse.error.code) });
    if (sse.contentFrames > 0) {
      // Tagged like the request, so thresholds can select a scenario or a prompt class (ttft{prompt:short}).
      ttft.add(res.timings.waiting, params.tags);
      if (sse.contentFrames > 1) interTokenLatency.add(res.timings.receiving / (sse.contentFrames - 1), params.tags);
    }
  }
  return { res, sse };
}

/**
 * Parses an OpenAI error envelope; null when the body is not one.
 * @param {unknown} body
 * @returns {{ message: string, type: string, code: string | null, param: string | null } | null}
 */
export function errorEnvelope(body) {
  try {
    /** @type {any} */
    const j = JSON.parse(String(body));
    return j && typeof j.error === 'object' && j.error !== null ? j.error : null;
  } catch (_e) {
    return null;
  }
}
