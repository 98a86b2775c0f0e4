// The gateway's tokenize stage: a request's exact prompt token count and chained block hashes.
// Thread: main (the acceptor). Small prompts are encoded inline, synchronously; larger ones go to the
// Piscina pool so a 100k-token prompt never stalls the event loop. Hot path: yes, once per request.
// The cut-off is tokenizer.inline_max_chars, compared with the text the inline encoder would actually have
// to tokenize (rendered segments not in its cache, so a long cached system prompt plus a short question
// stays inline); its value comes from `npm run bench -- tokenize` (src/tokenize/README.md): below it,
// encoding inline costs the acceptor less CPU than a worker round trip. threads = 0 means always inline.
// Caches: tokenizer.cache_bytes is split evenly between the inline encoder and each worker's encoder.
// Setup: create() builds the tokenizers and WASM hasher on this thread and in every worker (~1 s each).
import { initBlockHasher } from './block-hash.ts';
import { CachedPromptEncoder } from './cached-prompt-encoder.ts';
import { promptRefs, type PromptRefs } from './pool-refs.ts';
import { TokenizePool, type PoolCounters } from './pool.ts';
import { replyBlockHashes } from './reply-hashes.ts';
import { getTokenizer } from './tokenizer.ts';
import { warmPromptPath } from './warm-code.ts';
import { AbortError, type ChatMessage, type ChatOptions, type FallbackReason, type PromptWork, type ReplyWork, type TokenizerRef } from './types.ts';
import type { GatewayConfig, PoolConfig } from '../config/schema.ts';

export interface TokenizeRequest {
  pool: PoolConfig;
  kind: 'chat' | 'completion';
  messages?: ChatMessage[];
  /** The request's `tools` array when it sent one (changes the Llama 3.1 prompt). */
  tools?: unknown[] | null;
  /** add_generation_prompt, continue_final_message, chat_template_kwargs (Jinja templates); null: defaults. */
  chat?: ChatOptions | null;
  prompt?: string | number[];
  /** LoRA adapter name, or null for the base model: the block hashes' extra key. */
  adapter: string | null;
}

export interface TokenizeResult {
  promptTokens: number;
  /** One per full block of pool.block_size tokens, chained; integers below 2^53. */
  blockHashes: Float64Array;
  /** The ids after the last full block (fewer than pool.block_size): where the reply's blocks begin. */
  tailTokens: Uint32Array;
  /** Set when promptTokens is an estimate (no hashes, no tail then): why, for gateway_template_fallback_total. */
  estimated?: FallbackReason | null;
}

/** A finished reply whose blocks the replica now caches after its prompt's (see reply-hashes.ts). */
export interface ReplyHashRequest {
  pool: PoolConfig;
  kind: 'chat' | 'completion';
  adapter: string | null;
  /** The request's own tokenize result. */
  prompt: Pick<TokenizeResult, 'blockHashes' | 'tailTokens'>;
  /** The reply's text as the client received it. */
  replyText: string;
  finishReason: 'stop' | 'length';
}

export interface PromptTokenizerOptions {
  /** Tokenizers to build at setup on every thread (the pools' `tokenizer` names); default ['llama3']. */
  tokenizers?: readonly TokenizerRef[];
  /** Records inline tokenize time in seconds (GatewayMetrics.thread.tokenizeInline). */
  inlineObserver?: { observe(seconds: number): void } | null;
  /** Registers the inline encoder's cache size for scrape-time reading (GatewayMetrics.thread.trackTokenizerCache). */
  trackCache?: (bytes: () => number) => void;
  /** GatewayMetrics.workerChannel: workers record their task run time there. */
  metricsChannel?: string | null;
  /**
   * (tokenizer, template) pairs whose prompt path is run on synthetic prompts at setup, on this thread and in
   * every worker, so that the first requests find it optimised (warm-code.ts); default none.
   */
  warm?: readonly PromptRefs[];
}

export interface PromptTokenizerStats extends PoolCounters {
  inline: number;
  pooled: number;
  /** Pool tasks a worker is encoding right now. */
  running: number;
  /** replyHashes() calls hashed inline / on a worker. */
  replyInline: number;
  replyPooled: number;
}

/** What runs prompts too large for inline: the Piscina pool, or (on an acceptor thread) a port to it. */
export type TokenizeRunner = Pick<TokenizePool, 'run' | 'replyHashes' | 'queued' | 'running' | 'counters' | 'close'>;

export class PromptTokenizer {
  private readonly inlineMaxChars: number;
  private readonly inlineEncoder: CachedPromptEncoder;
  private readonly pool: TokenizeRunner | null;
  private readonly inlineObserver: { observe(seconds: number): void } | null;
  private inlineCount = 0;
  private pooledCount = 0;
  private replyInlineCount = 0;
  private replyPooledCount = 0;

  private constructor(cfg: GatewayConfig['tokenizer'], pool: TokenizeRunner | null, opts: PromptTokenizerOptions) {
    this.inlineMaxChars = pool === null ? Number.POSITIVE_INFINITY : cfg.inline_max_chars;
    const encoder = new CachedPromptEncoder(cfg.cache_bytes / (cfg.threads + 1));
    this.inlineEncoder = encoder;
    this.pool = pool;
    this.inlineObserver = opts.inlineObserver ?? null;
    opts.trackCache?.(() => encoder.cacheBytesUsed());
  }

  /**
   * Builds the inline encoder and `cfg.threads` workers, with the pools' tokenizers ready everywhere, so
   * the first request pays no setup. `options` may also be the tokenizer names alone.
   */
  static async create(cfg: GatewayConfig['tokenizer'], options: PromptTokenizerOptions | readonly TokenizerRef[] = {}): Promise<PromptTokenizer> {
    const opts: PromptTokenizerOptions = Array.isArray(options) ? { tokenizers: options as readonly TokenizerRef[] } : (options as PromptTokenizerOptions);
    const tokenizers = opts.tokenizers ?? ['llama3'];
    await initBlockHasher();
    for (const name of tokenizers) getTokenizer(name);
    let pool: TokenizePool | null = null;
    if (cfg.threads > 0) {
      pool = new TokenizePool(cfg.threads, cfg.cache_bytes / (cfg.threads + 1), opts.metricsChannel ?? null);
      // The workers warm while this thread does.
      const workers = pool.warmup(tokenizers, opts.warm ?? []);
      warmPromptPath(opts.warm ?? []);
      await workers;
    } else {
      warmPromptPath(opts.warm ?? []);
    }
    return new PromptTokenizer(cfg, pool, opts);
  }

  /**
   * An acceptor thread's tokenizer: its own inline encoder, and `runner` (a port to the main thread's one pool)
   * for large prompts; null runs everything inline (tokenizer.threads 0).
   */
  static async withRunner(cfg: GatewayConfig['tokenizer'], runner: TokenizeRunner | null, options: PromptTokenizerOptions = {}): Promise<PromptTokenizer> {
    await initBlockHasher();
    for (const name of options.tokenizers ?? ['llama3']) getTokenizer(name);
    warmPromptPath(options.warm ?? []);
    return new PromptTokenizer(cfg, runner, options);
  }

  /** The pool itself, for the main thread to serve acceptor threads' pooled tasks (null without one). */
  get runner(): TokenizeRunner | null {
    return this.pool;
  }

  /**
   * Rejects with an AbortError (err.name === 'AbortError') when `signal` aborts first, and with a
   * ChatTemplateError (a 400 for the client) when the template refuses the messages.
   */
  tokenize(req: TokenizeRequest, signal?: AbortSignal): Promise<TokenizeResult> {
    try {
      return Promise.resolve(this.measure(req, signal));
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
  }

  /**
   * tokenize() for the request path: an inline prompt's result is returned as it is, not in a promise, and its
   * errors are thrown, so the caller awaits only what goes to a worker (a promise, a microtask hop and a
   * resumed frame fewer per request).
   */
  measure(req: TokenizeRequest, signal?: AbortSignal): TokenizeResult | Promise<TokenizeResult> {
    if (signal?.aborted === true) throw new AbortError();
    const refs = promptRefs(req.pool);
    const work: PromptWork = {
      tokenizer: refs.tokenizer,
      template: refs.template,
      blockSize: req.pool.block_size,
      kind: req.kind,
      messages: req.messages,
      tools: req.tools ?? null,
      chat: req.chat ?? null,
      prompt: req.prompt,
      adapter: req.adapter,
    };
    let segments: string[] | null = null;
    try {
      if (this.pool !== null && work.kind === 'chat') segments = this.inlineEncoder.render(work);
    } catch (err) {
      this.inlineCount++;
      throw err;
    }
    if (this.pool === null || fitsInline(segments, this.inlineMaxChars) || this.inlineEncoder.uncachedChars(work, segments) <= this.inlineMaxChars) {
      this.inlineCount++;
      const startMs = this.inlineObserver === null ? 0 : performance.now();
      const measured = this.inlineEncoder.measure(work, null, segments);
      this.inlineObserver?.observe((performance.now() - startMs) / 1000);
      return measured;
    }
    this.pooledCount++;
    return this.pool.run(work, signal);
  }

  /**
   * Hashes of the reply's full blocks that the replica computed, continuing the prompt's chain (block i is
   * block prompt.blockHashes.length + i of the next turn's prompt). Inline up to inline_max_chars of reply
   * text, as prompts are (a 300-token reply: tens of µs); above it on a worker.
   */
  replyHashes(req: ReplyHashRequest): Promise<Float64Array> {
    const hashes = req.prompt.blockHashes;
    const refs = promptRefs(req.pool);
    const work: ReplyWork = {
      tokenizer: refs.tokenizer,
      template: refs.template,
      blockSize: req.pool.block_size,
      kind: req.kind,
      adapter: req.adapter,
      parentHash: hashes.length > 0 ? hashes[hashes.length - 1]! : null,
      tailTokens: req.prompt.tailTokens,
      replyText: req.replyText,
      finishReason: req.finishReason,
    };
    if (this.pool === null || req.replyText.length <= this.inlineMaxChars) {
      this.replyInlineCount++;
      try {
        return Promise.resolve(replyBlockHashes(work));
      } catch (err) {
        return Promise.reject(err instanceof Error ? err : new Error(String(err)));
      }
    }
    this.replyPooledCount++;
    return this.pool.replyHashes(work);
  }

  /** Pool tasks waiting for a worker (0 with no pool); inline work never queues. */
  queueDepth(): number {
    return this.pool?.queued() ?? 0;
  }

  stats(): PromptTokenizerStats {
    const counters = this.pool?.counters ?? { completed: 0, skipped: 0, stopped: 0 };
    return {
      ...counters, inline: this.inlineCount, pooled: this.pooledCount, running: this.pool?.running() ?? 0,
      replyInline: this.replyInlineCount, replyPooled: this.replyPooledCount,
    };
  }

  async close(): Promise<void> {
    await this.pool?.close();
  }
}

/**
 * True when the whole rendered prompt is within the inline cut-off, cached or not: the common short prompt
 * skips uncachedChars' cache probe of every segment. (Completion prompts have no segments: they take the probe,
 * which for them is a length read.)
 */
function fitsInline(segments: readonly string[] | null, maxChars: number): boolean {
  if (segments === null) return false;
  let chars = 0;
  for (let i = 0; i < segments.length; i++) chars += segments[i]!.length;
  return chars <= maxChars;
}
