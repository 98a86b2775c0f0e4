// The tokenize worker's task handler (workers/tokenize.worker.ts is its thin entry).
// Thread: a Piscina worker; one handler, one CachedPromptEncoder and one set of tokenizers per worker.
// Hot path: yes for prompts above tokenizer.inline_max_chars; the work is CachedPromptEncoder.measure().
// Also finished replies above that size: replyBlockHashes() (off the client's path).
// Returns a transferable Float64Array in the layout of protocol.ts.
import { WorkerMetrics } from '../metrics/worker-metrics.ts';
import { initBlockHasher } from './block-hash.ts';
import { CachedPromptEncoder } from './cached-prompt-encoder.ts';
import { ChatTemplateError } from './chat-template.ts';
import { FALLBACK_REASONS } from './jinja-template.ts';
import { transferResult } from './pool.ts';
import { replyBlockHashes } from './reply-hashes.ts';
import {
  CancelState, RESULT_HEADER, RESULT_PROMPT_TOKENS, RESULT_STATUS, ResultStatus,
  type TokenizeTask, type WorkerTask,
} from './protocol.ts';
import { getTokenizer } from './tokenizer.ts';
import { warmPromptPath } from './warm-code.ts';
import { AbortError } from './types.ts';

function statusOnly(status: ResultStatus): Float64Array {
  const out = new Float64Array(RESULT_HEADER);
  out[RESULT_STATUS] = status;
  return out;
}

export async function createTokenizeHandler(): Promise<(task: WorkerTask) => unknown> {
  await initBlockHasher();
  let encoder: CachedPromptEncoder | null = null;
  let metrics: WorkerMetrics | null = null;
  // Built on the first task that names a channel (every task does, so a worker that missed the warm-up
  // task still reports); it answers the main thread's scrapes on that BroadcastChannel.
  const setup = (task: WorkerTask): void => {
    encoder ??= new CachedPromptEncoder(task.cacheBytes);
    if (metrics === null && task.metricsChannel !== null) {
      metrics = new WorkerMetrics({ channelName: task.metricsChannel });
      metrics.trackTokenizerCache(() => encoder?.cacheBytesUsed() ?? 0);
    }
  };

  const runTokenize = (task: TokenizeTask): Float64Array => {
    const cancel = task.cancel;
    if (Atomics.compareExchange(cancel, 0, CancelState.pending, CancelState.running) === CancelState.cancelled) {
      return statusOnly(ResultStatus.skipped);
    }
    setup(task);
    const startMs = performance.now();
    try {
      const { promptTokens, blockHashes, tailTokens, estimated } = (encoder as CachedPromptEncoder).measure(task.work, () => Atomics.load(cancel, 0) === CancelState.cancelled);
      metrics?.tokenized((performance.now() - startMs) / 1000);
      if (estimated !== undefined && estimated !== null) return Float64Array.of(ResultStatus.estimated, promptTokens, FALLBACK_REASONS.indexOf(estimated));
      const out = new Float64Array(RESULT_HEADER + tailTokens.length + blockHashes.length);
      out[RESULT_STATUS] = ResultStatus.ok;
      out[RESULT_PROMPT_TOKENS] = promptTokens;
      out.set(tailTokens, RESULT_HEADER);
      out.set(blockHashes, RESULT_HEADER + tailTokens.length);
      return out;
    } catch (err) {
      if (err instanceof AbortError) return statusOnly(ResultStatus.stopped);
      if (err instanceof ChatTemplateError) return statusOnly(ResultStatus.templateError);
      throw err;
    }
  };

  return (task: WorkerTask): unknown => {
    switch (task.type) {
      case 'warmup':
        setup(task);
        for (const name of task.tokenizers) getTokenizer(name);
        warmPromptPath(task.warm);
        return true;
      case 'tokenize':
        return transferResult(runTokenize(task));
      case 'reply':
        setup(task);
        return transferResult(replyBlockHashes(task.work));
    }
  };
}
