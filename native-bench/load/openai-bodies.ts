// Request bodies the load generator sends: OpenAI chat completions with a fixed output length.
// Thread: bench main thread, built once per run (the body is a string reused by every request).
// Not on a hot path. `ignore_eos` makes the mock (and vLLM) produce exactly `max_tokens` tokens, so every
// target relays the same number of SSE frames; usage is requested in every case so byte counts match
// (the gateway always asks upstream for it and strips it only when the client did not).

export interface ChatBodyOptions {
  model: string;
  maxTokens: number;
  stream: boolean;
  /** User message; short by default so tokenization is a small, constant part of the gateway's cost. */
  prompt?: string;
}

export function chatBody(o: ChatBodyOptions): string {
  return JSON.stringify({
    model: o.model,
    messages: [{ role: 'user', content: o.prompt ?? 'Count from one to sixteen, one word per line.' }],
    max_tokens: o.maxTokens,
    ignore_eos: true,
    temperature: 0,
    stream: o.stream,
    ...(o.stream ? { stream_options: { include_usage: true } } : {}),
  });
}
