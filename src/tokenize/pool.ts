// The tokenize worker pool: the only module that imports piscina.
// Thread: constructed on the main thread at setup; transferResult() is also called inside workers.
// Hot path: run() is one postMessage each way plus a 4-byte SharedArrayBuffer per task (~µs); the measured
// round trip is in src/tokenize/README.md and decides tokenizer.inline_max_chars.
// Workers are fixed (min = max = threads, never idle-reaped) because each one builds ~40 MB of tokenizer
// state and warms its own caches; a respawn would cost ~1 s of CPU.
import { Piscina } from 'piscina';
import {
  CancelState, RESULT_HEADER, RESULT_PROMPT_TOKENS, RESULT_STATUS, ResultStatus,
  type WorkerTask,
} from './protocol.ts';
import { ChatTemplateError } from './chat-template.ts';
import { FALLBACK_REASONS } from './jinja-template.ts';
import type { PromptRefs } from './pool-refs.ts';
import { AbortError, type FallbackReason, type PromptWork, type ReplyWork, type TokenizerRef } from './types.ts';
import { TOKENIZER_YOUNG_GENERATION_MB, siblingModule, workerExecArgv } from '../util/spawn-worker.ts';

const WORKER_URL = siblingModule('../../workers/tokenize.worker', import.meta.url);

/**
 * Worker execArgv: the parent's, with tsx registered through its API. tsx's `--import tsx` entry registers
 * its hooks only on the main thread on Node 20, so an inherited `--import tsx` leaves a worker unable to
 * load .ts files; we drop it and import a one-line module that calls tsx's register() in the worker. A
 * compiled build's .js worker needs no loader.
 */
function tokenizeWorkerExecArgv(): string[] {
  const args = workerExecArgv();
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i] as string;
    if (a === '--import' && args[i + 1] === 'tsx') i++;
    else if (a !== '--import=tsx') out.push(a);
  }
  if (!WORKER_URL.pathname.endsWith('.ts')) return out;
  const register = `import { register } from ${JSON.stringify(import.meta.resolve('tsx/esm/api'))}; register();`;
  out.push('--import', `data:text/javascript,${encodeURIComponent(register)}`);
  return out;
}

/** Marks a worker's result for transfer instead of structured clone (call it inside the worker). */
export function transferResult(view: Float64Array): unknown {
  return Piscina.move(view);
}

export interface PoolOutcome {
  promptTokens: number;
  blockHashes: Float64Array;
  tailTokens: Uint32Array;
  /** Set when the count is an estimate (see MeasuredPrompt.estimated). */
  estimated?: FallbackReason | null;
}

export interface PoolCounters {
  completed: number;
  /** Tasks cancelled while queued: the worker dropped them unread. */
  skipped: number;
  /** Tasks cancelled while running: the worker stopped encoding early. */
  stopped: number;
}

export class TokenizePool {
  private readonly piscina: Piscina<WorkerTask, unknown>;
  private readonly threads: number;
  private readonly cacheBytesPerWorker: number;
  private readonly metricsChannel: string | null;
  /** Cancel cells of tasks submitted and not settled; their state says queued or running. */
  private readonly inFlight = new Set<Int32Array>();
  readonly counters: PoolCounters = { completed: 0, skipped: 0, stopped: 0 };

  constructor(threads: number, cacheBytesPerWorker: number, metricsChannel: string | null) {
    this.threads = threads;
    this.cacheBytesPerWorker = cacheBytesPerWorker;
    this.metricsChannel = metricsChannel;
    this.piscina = new Piscina<WorkerTask, unknown>({
      filename: WORKER_URL.href,
      minThreads: threads,
      maxThreads: threads,
      idleTimeout: Number.POSITIVE_INFINITY,
      concurrentTasksPerWorker: 1,
      // 'async' (Atomics.waitAsync) keeps an idle worker's event loop running, so it can answer the metrics
      // scrape on its BroadcastChannel; 'sync' would block it in Atomics.wait between tasks.
      atomics: 'async',
      execArgv: tokenizeWorkerExecArgv(),
      resourceLimits: { maxYoungGenerationSizeMb: TOKENIZER_YOUNG_GENERATION_MB },
    });
  }

  /**
   * Builds the given tokenizers in every worker and runs the prompt path of each `warm` pair there
   * (warm-code.ts); one warm-up task per worker, submitted together.
   */
  async warmup(tokenizers: readonly TokenizerRef[], warm: readonly PromptRefs[] = []): Promise<void> {
    const tasks: Promise<unknown>[] = [];
    for (let i = 0; i < this.threads; i++) tasks.push(this.piscina.run({ type: 'warmup', tokenizers, warm, cacheBytes: this.cacheBytesPerWorker, metricsChannel: this.metricsChannel }));
    await Promise.all(tasks);
  }

  /** Tasks submitted and not yet started by a worker (a scan of the in-flight set: it is small). */
  queued(): number {
    let n = 0;
    for (const cell of this.inFlight) if (Atomics.load(cell, 0) === CancelState.pending) n++;
    return n;
  }

  /** Tasks a worker is encoding now. */
  running(): number {
    let n = 0;
    for (const cell of this.inFlight) if (Atomics.load(cell, 0) === CancelState.running) n++;
    return n;
  }

  run(work: PromptWork, signal: AbortSignal | undefined): Promise<PoolOutcome> {
    if (signal?.aborted === true) return Promise.reject(new AbortError());
    const cancel = new Int32Array(new SharedArrayBuffer(4));
    this.inFlight.add(cancel);
    return new Promise<PoolOutcome>((resolve, reject) => {
      const onAbort = (): void => {
        Atomics.store(cancel, 0, CancelState.cancelled);
        reject(new AbortError());
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.piscina.run({ type: 'tokenize', work, cancel, cacheBytes: this.cacheBytesPerWorker, metricsChannel: this.metricsChannel }).then(
        (raw) => {
          this.inFlight.delete(cancel);
          signal?.removeEventListener('abort', onAbort);
          const result = raw as Float64Array;
          switch (result[RESULT_STATUS] as ResultStatus) {
            case ResultStatus.ok: {
              this.counters.completed++;
              const promptTokens = result[RESULT_PROMPT_TOKENS] as number;
              const tailEnd = RESULT_HEADER + (promptTokens % work.blockSize);
              resolve({ promptTokens, blockHashes: result.subarray(tailEnd), tailTokens: Uint32Array.from(result.subarray(RESULT_HEADER, tailEnd)) });
              return;
            }
            case ResultStatus.skipped:
              this.counters.skipped++;
              reject(new AbortError());
              return;
            case ResultStatus.stopped:
              this.counters.stopped++;
              reject(new AbortError());
              return;
            case ResultStatus.estimated:
              this.counters.completed++;
              resolve({ promptTokens: result[RESULT_PROMPT_TOKENS] as number, blockHashes: new Float64Array(0), tailTokens: new Uint32Array(0), estimated: FALLBACK_REASONS[result[RESULT_HEADER] as number] ?? 'render_error' });
              return;
            case ResultStatus.templateError:
              reject(new ChatTemplateError('the chat template refused the messages'));
              return;
          }
        },
        (err: unknown) => {
          this.inFlight.delete(cancel);
          signal?.removeEventListener('abort', onAbort);
          reject(err instanceof Error ? err : new Error(String(err)));
        },
      );
    });
  }

  /** A finished reply's block hashes (reply-hashes.ts), computed by a worker; not cancellable, not counted. */
  async replyHashes(work: ReplyWork): Promise<Float64Array> {
    return await this.piscina.run({ type: 'reply', work, cacheBytes: this.cacheBytesPerWorker, metricsChannel: this.metricsChannel }) as Float64Array;
  }

  async close(): Promise<void> {
    await this.piscina.close();
  }
}
