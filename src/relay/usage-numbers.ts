// Token counts read from a replica's `usage` object (streamed usage chunk or non-streaming body). They feed
// billing (quota settlement, usage records) and counters, so only finite non-negative numbers are taken: a
// backend or proxy that sends `"completion_tokens":"7"` or `-1` must not turn a counter into a string or
// charge a negative amount. Thread: main. Per request, once.

export interface UsageNumbers {
  promptTokens: number;
  completionTokens: number;
  cachedTokens: number;
}

/** A count, floored, or null when `v` is not a finite non-negative number. */
export function tokenCount(v: unknown): number | null {
  return typeof v === 'number' && Number.isFinite(v) && v >= 0 ? Math.floor(v) : null;
}

/**
 * The three counts of an OpenAI usage object, or null when it has no usable completion_tokens (the caller
 * then keeps its own counts). A missing or malformed prompt or cached count reads as 0.
 */
export function usageNumbers(u: unknown): UsageNumbers | null {
  return countsOf(u, 'prompt_tokens', 'completion_tokens', 'prompt_tokens_details');
}

/** The Responses API's usage object (input_tokens, output_tokens, input_tokens_details), read the same way. */
export function responsesUsage(u: unknown): UsageNumbers | null {
  return countsOf(u, 'input_tokens', 'output_tokens', 'input_tokens_details');
}

function countsOf(u: unknown, prompt: string, completion: string, details: string): UsageNumbers | null {
  if (u === null || typeof u !== 'object') return null;
  const o = u as Record<string, unknown>;
  const completionTokens = tokenCount(o[completion]);
  if (completionTokens === null) return null;
  const d = o[details] as { cached_tokens?: unknown } | null | undefined;
  return {
    promptTokens: tokenCount(o[prompt]) ?? 0,
    completionTokens,
    cachedTokens: (d !== null && typeof d === 'object' ? tokenCount(d.cached_tokens) : null) ?? 0,
  };
}
