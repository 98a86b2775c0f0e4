// Byte-exact vLLM response bodies: SSE chunks for chat and completions (docs/vllm-facts.md "Wire format")
// and the non-streaming JSON shapes. Thread: main (mock process). Hot path of the mock: one frame per
// generated token, built from per-request prefixes computed once, plus JSON.stringify of the token text.
//
// Chat chunks are pydantic `exclude_unset=True` (only set fields); completions chunks are
// `exclude_unset=False` (every field, nulls included); usage chunks are `exclude_none=True`, so
// `prompt_tokens_details` appears only when cached_tokens > 0.
import type { CompletionKind } from './completion-request.ts';

export const DONE_FRAME = 'data: [DONE]\n\n';

export interface UsageCounts {
  promptTokens: number;
  completionTokens: number;
  cachedTokens: number;
}

/** Usage as in the final usage chunk (exclude_none): details only when cached > 0. */
function usageExcludeNone(u: UsageCounts): string {
  const base = `{"prompt_tokens":${u.promptTokens},"total_tokens":${u.promptTokens + u.completionTokens},"completion_tokens":${u.completionTokens}`;
  return u.cachedTokens > 0 ? `${base},"prompt_tokens_details":{"cached_tokens":${u.cachedTokens}}}` : `${base}}`;
}

/** Usage in a non-streamed body: details null when there is no hit. */
function usageFull(u: UsageCounts): string {
  const base = `{"prompt_tokens":${u.promptTokens},"total_tokens":${u.promptTokens + u.completionTokens},"completion_tokens":${u.completionTokens}`;
  return u.cachedTokens > 0 ? `${base},"prompt_tokens_details":{"cached_tokens":${u.cachedTokens}}}` : `${base},"prompt_tokens_details":null}`;
}

/** Running usage of continuous_usage_stats chunks. */
function usageRunning(promptTokens: number, completionTokens: number): string {
  return `{"prompt_tokens":${promptTokens},"total_tokens":${promptTokens + completionTokens},"completion_tokens":${completionTokens}}`;
}

export function completionId(kind: CompletionKind, base: string): string {
  return (kind === 'chat' ? 'chatcmpl-' : 'cmpl-') + base;
}

/** Builds every frame of one streamed response; prefixes are computed once per request. */
export class StreamFrames {
  private readonly head: string;
  private readonly isChat: boolean;

  constructor(kind: CompletionKind, id: string, createdSeconds: number, model: string, private readonly continuousUsage: boolean, private readonly promptTokens: number) {
    this.isChat = kind === 'chat';
    const object = this.isChat ? 'chat.completion.chunk' : 'text_completion';
    this.head = `data: {"id":${JSON.stringify(id)},"object":"${object}","created":${createdSeconds},"model":${JSON.stringify(model)},"choices":`;
  }

  /** Chat only: the assistant role chunk sent together with the first token. */
  role(): string {
    const usage = this.continuousUsage ? `,"usage":${usageRunning(this.promptTokens, 0)}` : '';
    return `${this.head}[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]${usage}}\n\n`;
  }

  /** A token chunk; `generated` = tokens generated so far including this one (for continuous usage). */
  token(text: string, generated: number): string {
    return this.tokenFrame(text, generated, null);
  }

  /** The last token, carrying finish_reason and stop_reason. */
  last(text: string, generated: number, finishReason: 'stop' | 'length'): string {
    return this.tokenFrame(text, generated, finishReason);
  }

  private tokenFrame(text: string, generated: number, finishReason: string | null): string {
    const fr = finishReason === null ? 'null' : `"${finishReason}"`;
    const t = JSON.stringify(text);
    if (this.isChat) {
      const usage = this.continuousUsage ? `,"usage":${usageRunning(this.promptTokens, generated)}` : '';
      const stop = finishReason === null ? '' : ',"stop_reason":null';
      return `${this.head}[{"index":0,"delta":{"content":${t}},"logprobs":null,"finish_reason":${fr}${stop}}]${usage}}\n\n`;
    }
    const usage = this.continuousUsage
      ? `{"prompt_tokens":${this.promptTokens},"total_tokens":${this.promptTokens + generated},"completion_tokens":${generated},"prompt_tokens_details":null}`
      : 'null';
    return `${this.head}[{"index":0,"text":${t},"logprobs":null,"finish_reason":${fr},"stop_reason":null,"prompt_logprobs":null}],"usage":${usage}}\n\n`;
  }

  /** The include_usage chunk: no choices, the whole usage. */
  usage(u: UsageCounts): string {
    return `${this.head}[],"usage":${usageExcludeNone(u)}}\n\n`;
  }
}

/** An error after the 200 went out: one error frame, then [DONE] (vLLM keeps the status at 200). */
export function errorFrame(status: number, type: string, message: string): string {
  return `data: ${JSON.stringify({ error: { message, type, param: null, code: status } })}\n\n${DONE_FRAME}`;
}

export interface FullResponse {
  kind: CompletionKind;
  id: string;
  createdSeconds: number;
  model: string;
  text: string;
  finishReason: 'stop' | 'length';
  usage: UsageCounts;
}

/** The non-streamed body (≈v0.10+ field set and order). */
export function fullResponseBody(r: FullResponse): string {
  const head = `{"id":${JSON.stringify(r.id)},"object":"${r.kind === 'chat' ? 'chat.completion' : 'text_completion'}","created":${r.createdSeconds},"model":${JSON.stringify(r.model)},"choices":[`;
  const text = JSON.stringify(r.text);
  if (r.kind === 'chat') {
    return `${head}{"index":0,"message":{"role":"assistant","content":${text},"refusal":null,"annotations":null,"audio":null,"function_call":null,"tool_calls":[],"reasoning_content":null},"logprobs":null,"finish_reason":"${r.finishReason}","stop_reason":null}],"service_tier":null,"system_fingerprint":null,"usage":${usageFull(r.usage)},"prompt_logprobs":null,"kv_transfer_params":null}`;
  }
  return `${head}{"index":0,"text":${text},"logprobs":null,"finish_reason":"${r.finishReason}","stop_reason":null,"prompt_logprobs":null}],"usage":${usageFull(r.usage)},"kv_transfer_params":null}`;
}
