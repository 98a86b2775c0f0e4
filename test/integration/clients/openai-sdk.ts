// The one module that imports the official `openai` SDK for the client-compatibility suite (and the gateway
// tests that speak through it). Thread: main (test process).
import OpenAI from 'openai';

export { OpenAI };

/**
 * A client of the gateway at `url` as a user would configure one. `maxRetries` 0 unless a test exercises the
 * SDK's retries; the SDK then sleeps what the gateway's Retry-After says (whole seconds), so only the 429 tests
 * pay for a retry.
 */
export function openaiClient(url: string, apiKey: string, opts: { maxRetries?: number; headers?: Record<string, string> } = {}): OpenAI {
  return new OpenAI({ apiKey, baseURL: `${url}/v1`, maxRetries: opts.maxRetries ?? 0, ...(opts.headers ? { defaultHeaders: opts.headers } : {}) });
}
