// vLLM's Responses API shapes (docs/vllm-facts.md "Responses API"): the response object
// (ResponsesResponse.from_request), its output message item, its usage, and the SSE events of a streamed
// response, each framed `event: TYPE\ndata: JSON\n\n` with a sequence_number from 0 and no [DONE] at the end.
// Thread: main (mock process). Per streamed token one small object and one JSON.stringify.

export interface ResponsesUsage {
  inputTokens: number;
  outputTokens: number;
  cachedTokens: number;
}

export type ResponseStatus = 'queued' | 'in_progress' | 'completed' | 'incomplete' | 'cancelled' | 'failed';

/** The request fields the response object echoes. */
export interface ResponseEcho {
  id: string;
  createdAt: number;
  model: string;
  instructions: string | null;
  maxOutputTokens: number;
  previousResponseId: string | null;
  background: boolean;
}

export function outputMessage(itemId: string, text: string): Record<string, unknown> {
  return {
    id: itemId, content: [{ annotations: [], text, type: 'output_text', logprobs: null }], role: 'assistant', status: 'completed', type: 'message',
  };
}

export function usageObject(u: ResponsesUsage): Record<string, unknown> {
  return {
    input_tokens: u.inputTokens,
    input_tokens_details: { cached_tokens: u.cachedTokens },
    output_tokens: u.outputTokens,
    output_tokens_details: { reasoning_tokens: 0, tool_output_tokens: 0 },
    total_tokens: u.inputTokens + u.outputTokens,
  };
}

/** The response object; `output` empty and `usage` null until the response is done. */
export function responseObject(e: ResponseEcho, status: ResponseStatus, output: unknown[], usage: ResponsesUsage | null): Record<string, unknown> {
  return {
    id: e.id, created_at: e.createdAt, incomplete_details: null, instructions: e.instructions, metadata: null, model: e.model,
    object: 'response', output, parallel_tool_calls: true, temperature: 1.0, tool_choice: 'auto', tools: [], top_p: 1.0,
    background: e.background, max_output_tokens: e.maxOutputTokens, max_tool_calls: null, previous_response_id: e.previousResponseId,
    prompt: null, reasoning: null, service_tier: 'auto', status, text: null, top_logprobs: null, truncation: 'disabled',
    usage: usage === null ? null : usageObject(usage), user: null,
  };
}

/** Builds the events of one streamed response in order; sequence numbers count from 0. */
export class ResponseEvents {
  private seq = 0;

  constructor(private readonly itemId: string) {}

  private frame(type: string, fields: Record<string, unknown>): string {
    return `event: ${type}\ndata: ${JSON.stringify({ ...fields, sequence_number: this.seq++, type })}\n\n`;
  }

  /** response.created and response.in_progress: sent before prefill, as soon as the request is scheduled. */
  opening(response: Record<string, unknown>): string {
    return this.frame('response.created', { response }) + this.frame('response.in_progress', { response });
  }

  /** response.output_item.added and response.content_part.added: with the first token. */
  itemAdded(): string {
    const item = { id: this.itemId, content: [], role: 'assistant', status: 'in_progress', type: 'message' };
    const part = { annotations: [], text: '', type: 'output_text', logprobs: [] };
    return this.frame('response.output_item.added', { item, output_index: 0 })
      + this.frame('response.content_part.added', { content_index: 0, item_id: this.itemId, output_index: 0, part });
  }

  delta(text: string): string {
    return this.frame('response.output_text.delta', { content_index: 0, delta: text, item_id: this.itemId, logprobs: [], output_index: 0 });
  }

  /** output_text.done, content_part.done, output_item.done, then response.completed with the final response. */
  closing(text: string, final: Record<string, unknown>): string {
    const part = { annotations: [], text, type: 'output_text' };
    return this.frame('response.output_text.done', { content_index: 0, item_id: this.itemId, logprobs: [], output_index: 0, text })
      + this.frame('response.content_part.done', { content_index: 0, item_id: this.itemId, output_index: 0, part })
      + this.frame('response.output_item.done', { item: outputMessage(this.itemId, text), output_index: 0 })
      + this.frame('response.completed', { response: final });
  }
}
