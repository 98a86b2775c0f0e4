// What every simulator workload produces: requests in arrival order, each with its prompt's chained block
// hashes (the gateway's routing key and the engine's prefix-cache key), and what a pool tells a workload.
// Thread: the run's (main or a sweep worker). Not a hot path beyond one object per request.

export interface SimRequest {
  /** Dense 0-based index in arrival order. */
  seq: number;
  atMs: number;
  adapter: string | null;
  promptTokens: number;
  /** Tokens the engine will generate (the reply's true length). */
  outputTokens: number;
  /** The client's max_tokens: what the gateway reserves for. ≥ outputTokens. */
  maxTokens: number;
  /** Chained hashes of the prompt's full blocks, block 0 first. */
  blockHashes: Float64Array;
  /**
   * Hashes of the full blocks a reply of `outputTokens` adds after the prompt, continuing the chain as the
   * conversation's next turn would hash them (every turn, whether or not one follows); the engine caches the
   * reply under them and the gateway reports those it produced. Null when not known (a Mooncake record whose ids stop short of its prompt).
   */
  replyHashes: Float64Array | null;
  /**
   * Who said what, for clients that send real text (the live load generator): the tenant's index, the
   * conversation it belongs to, and how many of its prompt tokens are the tenant's system prompt and the
   * earlier turns it carries (system prompt included). Absent for traces.
   */
  origin?: { tenant: number; conversation: number; systemTokens: number; historyTokens: number };
}

/** A stream of requests in arrival order. */
export interface Workload {
  readonly name: string;
  /** The next request, or null when the workload has no more before its end. */
  next(): SimRequest | null;
}

/** The pool a workload is generated for. */
export interface PoolShape {
  id: string;
  /** Longest prompt + output the pool's engines accept. */
  maxModelLen: number;
  blockSize: number;
  /** LoRA adapters the pool serves (empty: base model only). */
  adapters: readonly string[];
}
