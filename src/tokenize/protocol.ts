// Messages between PromptTokenizer (main thread) and workers/tokenize.worker.ts (Piscina threads).
// Thread: both sides import these types and constants; nothing here runs on its own.
// A task carries the work description (small: messages or prompt text, pool's tokenizer/template/block
// size, adapter) and a 4-byte SharedArrayBuffer cancel cell. The result is one Float64Array, transferred
// rather than cloned: [status, promptTokens, ...tailTokens, ...blockHashes], the tail being the
// promptTokens mod blockSize ids after the last full block (token ids, counts and 53-bit hashes are exact
// doubles). A reply task (reply-hashes.ts) has no cancel cell and returns the bare hashes, transferred.
// Cancellation is cooperative: the worker claims the cell before starting (a task cancelled
// while queued costs microseconds) and every few thousand pieces while encoding. We never pass the
// AbortSignal to Piscina, because Piscina aborts a running task by terminating its worker, which would
// throw away the worker's caches and cost a ~1 s tokenizer rebuild.
import type { PromptRefs } from './pool-refs.ts';
import type { PromptWork, ReplyWork, TokenizerRef } from './types.ts';

export interface TokenizeTask {
  type: 'tokenize';
  work: PromptWork;
  /** Int32Array over a SharedArrayBuffer; index 0 holds a CancelState. */
  cancel: Int32Array;
  /** This worker's share of tokenizer.cache_bytes; read once, when the worker builds its caches. */
  cacheBytes: number;
  /** GatewayMetrics.workerChannel: the worker records task run time there; null records nothing. */
  metricsChannel: string | null;
}

export interface WarmupTask {
  type: 'warmup';
  tokenizers: readonly TokenizerRef[];
  /** (tokenizer, template) pairs whose prompt path the worker runs on synthetic prompts (warm-code.ts). */
  warm: readonly PromptRefs[];
  cacheBytes: number;
  metricsChannel: string | null;
}

/** A finished reply's block hashes; small and off the client's path, so it is never cancelled. */
export interface ReplyTask {
  type: 'reply';
  work: ReplyWork;
  cacheBytes: number;
  metricsChannel: string | null;
}

export type WorkerTask = TokenizeTask | WarmupTask | ReplyTask;

/** The task's cell: main sets cancelled at any time; the worker moves pending → running when it starts. */
export const CancelState = { pending: 0, cancelled: 1, running: 2 } as const;

export const ResultStatus = {
  ok: 0,
  /** The cancel cell was set before the worker started the task. */
  skipped: 1,
  /** The cancel cell was set while the worker was encoding; it stopped early. */
  stopped: 2,
  /** The chat template refused the messages (e.g. several tool calls in one assistant turn). */
  templateError: 3,
  /**
   * The prompt could not be rendered as vLLM renders it: [status, estimated count, index of the reason in
   * FALLBACK_REASONS], no tail, no hashes.
   */
  estimated: 4,
} as const;
export type ResultStatus = (typeof ResultStatus)[keyof typeof ResultStatus];

/** Index of the status and the prompt token count in a result array; the tail's ids, then the hashes follow. */
export const RESULT_STATUS = 0;
export const RESULT_PROMPT_TOKENS = 1;
export const RESULT_HEADER = 2;
