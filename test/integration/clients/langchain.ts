// The one module that imports LangChain (`@langchain/openai`, `@langchain/core`) for the client-compatibility
// suite. LangChain calls the gateway through its own copy of the `openai` SDK with that SDK's retries off,
// and retries in its own AsyncCaller (p-retry, backoff from 1 s, at least the Retry-After it is given).
// Thread: main (test process).
import { ChatOpenAI, OpenAI as CompletionsLLM } from '@langchain/openai';

export { ContextOverflowError } from '@langchain/core/errors';
export { HumanMessage, SystemMessage } from '@langchain/core/messages';

export interface LangChainOptions {
  model: string;
  /** Sent on every call of this client: the tests name each request through x-request-id. */
  requestId?: string;
  maxTokens?: number;
  /** LangChain's own default is 6; 0 unless a test exercises the retries. */
  maxRetries?: number;
  /** ChatOpenAI speaks POST /v1/responses instead of chat completions. */
  useResponsesApi?: boolean;
}

function configuration(url: string, requestId?: string): { baseURL: string; defaultHeaders?: Record<string, string> } {
  return { baseURL: `${url}/v1`, ...(requestId ? { defaultHeaders: { 'x-request-id': requestId } } : {}) };
}

/** ChatOpenAI as pointed at an OpenAI-compatible server; streamed calls ask for the usage chunk (streamUsage). */
export function chatModel(url: string, apiKey: string, o: LangChainOptions): ChatOpenAI {
  return new ChatOpenAI({
    model: o.model, apiKey, configuration: configuration(url, o.requestId), maxRetries: o.maxRetries ?? 0,
    streamUsage: true, useResponsesApi: o.useResponsesApi ?? false, ...(o.maxTokens !== undefined ? { maxTokens: o.maxTokens } : {}),
  });
}

/** LangChain's text-completions LLM (POST /v1/completions). */
export function completionsModel(url: string, apiKey: string, o: LangChainOptions): CompletionsLLM {
  return new CompletionsLLM({
    model: o.model, apiKey, configuration: configuration(url, o.requestId), maxRetries: o.maxRetries ?? 0,
    ...(o.maxTokens !== undefined ? { maxTokens: o.maxTokens } : {}),
  });
}
