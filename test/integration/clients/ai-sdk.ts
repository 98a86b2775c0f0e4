// The one module that imports the Vercel AI SDK (`ai`, `@ai-sdk/openai-compatible`, `@ai-sdk/openai`) for the
// client-compatibility suite. Thread: main (test process).
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { createOpenAI } from '@ai-sdk/openai';

export { generateText, streamText, APICallError, RetryError } from 'ai';

/**
 * The provider most AI SDK users put in front of a vLLM-style server. `includeUsage` asks for the streamed
 * usage chunk (stream_options.include_usage), without which a streamed result has no token counts.
 */
export function compatibleProvider(url: string, apiKey: string, headers: Record<string, string> = {}): ReturnType<typeof createOpenAICompatible> {
  return createOpenAICompatible({ name: 'expediter', baseURL: `${url}/v1`, apiKey, headers, includeUsage: true });
}

/** The AI SDK's own OpenAI provider pointed at the gateway (`.chat(id)` speaks chat completions). */
export function openaiProvider(url: string, apiKey: string, headers: Record<string, string> = {}): ReturnType<typeof createOpenAI> {
  return createOpenAI({ baseURL: `${url}/v1`, apiKey, headers });
}
