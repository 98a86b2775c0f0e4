// Per-token timing of one OpenAI-style SSE response, fed the body's chunks as they arrive with the time each
// arrived: when the first token came (TTFT), when the last one came, how many tokens, the usage chunk, and
// whether the stream ended with `data: [DONE]` or with an error event. Time per output token (TPOT) is then
// (last − first) / (tokens − 1), the definition vLLM's own `time_per_output_token` uses per request.
// Thread: the load generator's main thread, once per received chunk. Cost: one JSON.parse per SSE event
// (≈ 1-2 µs for a 200-byte chunk), which the client's CPU-per-request figure includes.
import { StringDecoder } from 'node:string_decoder';

export interface StreamTiming {
  /** Arrival time of the first event carrying output text (ms, the caller's clock); NaN when none came. */
  firstTokenMs: number;
  lastTokenMs: number;
  /** Events that carried output text (one per engine step for vLLM and the mock). */
  tokenEvents: number;
  /** From the usage chunk when the stream carried one. */
  promptTokens: number | null;
  completionTokens: number | null;
  cachedTokens: number | null;
  /** `data:` events of any kind, [DONE] included. */
  events: number;
  done: boolean;
  /** `code` of a `data: {"error":…}` event (a failure after the first byte), else null. */
  errorCode: string | null;
}

interface Chunk {
  error?: { code?: unknown };
  usage?: { prompt_tokens?: number; completion_tokens?: number; prompt_tokens_details?: { cached_tokens?: number } | null } | null;
  choices?: Array<{ delta?: { content?: unknown }; text?: unknown }>;
}

export class SseTimer {
  private readonly decoder = new StringDecoder('utf8');
  private buffered = '';
  private readonly t: StreamTiming = {
    firstTokenMs: NaN, lastTokenMs: NaN, tokenEvents: 0, promptTokens: null, completionTokens: null,
    cachedTokens: null, events: 0, done: false, errorCode: null,
  };

  /** Feeds one body chunk that arrived at `nowMs`; events completed by it are timed at `nowMs`. */
  push(chunk: Buffer | string, nowMs: number): void {
    let text = this.buffered + (typeof chunk === 'string' ? chunk : this.decoder.write(chunk));
    if (text.includes('\r')) text = text.replace(/\r\n/g, '\n');
    let start = 0;
    for (let end = text.indexOf('\n\n'); end !== -1; end = text.indexOf('\n\n', start)) {
      this.event(text.slice(start, end), nowMs);
      start = end + 2;
    }
    this.buffered = text.slice(start);
  }

  result(): StreamTiming {
    return { ...this.t };
  }

  private event(block: string, nowMs: number): void {
    let data = '';
    for (const line of block.split('\n')) {
      // Comment lines (`: keep-alive`) and other fields carry no data.
      if (line.startsWith('data:')) data += (data ? '\n' : '') + line.slice(line[5] === ' ' ? 6 : 5);
    }
    if (data === '') return;
    this.t.events++;
    if (data === '[DONE]') {
      this.t.done = true;
      return;
    }
    let c: Chunk;
    try {
      c = JSON.parse(data) as Chunk;
    } catch {
      return;
    }
    if (c.error) {
      this.t.errorCode = typeof c.error.code === 'string' ? c.error.code : String(c.error.code ?? 'error');
      return;
    }
    if (c.usage) {
      this.t.promptTokens = c.usage.prompt_tokens ?? null;
      this.t.completionTokens = c.usage.completion_tokens ?? null;
      this.t.cachedTokens = c.usage.prompt_tokens_details?.cached_tokens ?? null;
    }
    const choice = c.choices?.[0];
    if (!choice) return;
    const piece = choice.delta ? choice.delta.content : choice.text;
    // The role chunk (content "") carries no token.
    if (typeof piece !== 'string' || piece.length === 0) return;
    if (this.t.tokenEvents === 0) this.t.firstTokenMs = nowMs;
    this.t.lastTokenMs = nowMs;
    this.t.tokenEvents++;
  }
}

/**
 * Time per output token of one stream: the gaps between its first and last token averaged over the tokens
 * after the first. Uses the usage chunk's completion_tokens when present (an engine may put several tokens in
 * one event), else the token events. NaN for fewer than two tokens.
 */
export function tpotMs(t: StreamTiming): number {
  const tokens = t.completionTokens ?? t.tokenEvents;
  if (tokens < 2 || !Number.isFinite(t.firstTokenMs)) return NaN;
  return (t.lastTokenMs - t.firstTokenMs) / (tokens - 1);
}
