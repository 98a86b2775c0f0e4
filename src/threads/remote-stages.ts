// An acceptor thread's handles on the stages there is exactly one of per process: the quota store, the
// tokenizer pool and the usage sinks live on the main thread and are reached over the acceptor's Worker port.
// Thread: acceptor workers. Hot path: acquire/settle (every request) and pooled tokenize (large prompts only)
// each cost one message each way, usage one message without answer; messages of one loop turn cross together
// (outbox.ts).
import type { Postable } from './outbox.ts';
import type { QuotaDecision, QuotaStore, TenantLimits } from '../quota/types.ts';
import type { PoolCounters, PoolOutcome } from '../tokenize/pool.ts';
import type { TokenizeRunner } from '../tokenize/prompt-tokenizer.ts';
import { AbortError, type PromptWork, type ReplyWork } from '../tokenize/types.ts';
import { ChatTemplateError } from '../tokenize/chat-template.ts';
import type { UsageRecord, UsageSink } from '../usage/usage-record.ts';
import type { CallMethod, ErrorShape, ToMain } from './protocol.ts';

interface Pending {
  resolve(v: unknown): void;
  reject(err: Error): void;
}

/** Request/answer over the Worker port; answers are matched by id (the main thread may answer out of order). */
export class MainCaller {
  private readonly port: Postable;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;

  constructor(port: Postable) {
    this.port = port;
  }

  get outstanding(): number {
    return this.pending.size;
  }

  call(m: CallMethod, a: unknown[]): { id: number; done: Promise<unknown> } {
    const id = this.nextId++;
    const done = new Promise<unknown>((resolve, reject) => this.pending.set(id, { resolve, reject }));
    this.port.postMessage({ t: 'call', id, m, a } satisfies ToMain);
    return { id, done };
  }

  /** Tells the main thread to abort call `id` and rejects it here at once (the late answer is dropped). */
  cancel(id: number, err: Error): void {
    const p = this.pending.get(id);
    if (p === undefined) return;
    this.pending.delete(id);
    this.port.postMessage({ t: 'cancel', id } satisfies ToMain);
    p.reject(err);
  }

  answered(id: number, v: unknown, err: ErrorShape | undefined): void {
    const p = this.pending.get(id);
    if (p === undefined) return;
    this.pending.delete(id);
    if (err === undefined) p.resolve(v);
    else p.reject(rebuildError(err));
  }
}

/** The error classes the pipeline tells apart by name keep their names across the port. */
function rebuildError(e: ErrorShape): Error {
  if (e.name === 'AbortError') return new AbortError(e.message);
  if (e.name === 'ChatTemplateError') return new ChatTemplateError(e.message);
  const err = new Error(e.message);
  err.name = e.name;
  return err;
}

/** The main thread's quota store: buckets and leases stay one set, so limits hold exactly across threads. */
export class RemoteQuotaStore implements QuotaStore {
  private readonly caller: MainCaller;

  constructor(caller: MainCaller) {
    this.caller = caller;
  }

  acquire(tenant: TenantLimits, requestId: string, costTokens: number): Promise<QuotaDecision> {
    return this.caller.call('acquire', [tenant, requestId, costTokens]).done as Promise<QuotaDecision>;
  }

  async settle(tenant: TenantLimits, requestId: string, reservedTokens: number, usedTokens: number): Promise<void> {
    await this.caller.call('settle', [tenant, requestId, reservedTokens, usedTokens]).done;
  }

  /** The store is the main thread's; it closes it after every acceptor has drained. */
  async close(): Promise<void> {}
}

/** The main thread's tokenizer pool, for prompts above tokenizer.inline_max_chars. */
export class RemoteTokenizePool implements TokenizeRunner {
  private readonly caller: MainCaller;
  private inFlight = 0;
  readonly counters: PoolCounters = { completed: 0, skipped: 0, stopped: 0 };

  constructor(caller: MainCaller) {
    this.caller = caller;
  }

  async run(work: PromptWork, signal: AbortSignal | undefined): Promise<PoolOutcome> {
    if (signal?.aborted === true) throw new AbortError();
    const { id, done } = this.caller.call('tokenize', [work]);
    const onAbort = (): void => this.caller.cancel(id, new AbortError());
    signal?.addEventListener('abort', onAbort, { once: true });
    this.inFlight++;
    try {
      const out = await done as PoolOutcome;
      this.counters.completed++;
      return out;
    } catch (err) {
      if ((err as Error).name === 'AbortError') this.counters.skipped++;
      throw err;
    } finally {
      this.inFlight--;
      signal?.removeEventListener('abort', onAbort);
    }
  }

  async replyHashes(work: ReplyWork): Promise<Float64Array> {
    return await this.caller.call('replyHashes', [work]).done as Float64Array;
  }

  /** Tasks sent and not answered (queued or running on the main thread's pool: this side cannot tell). */
  queued(): number {
    return this.inFlight;
  }

  running(): number {
    return 0;
  }

  async close(): Promise<void> {}
}

/** Sends each usage record to the main thread, whose sinks write them: one writer, whole lines. */
export class PortUsageSink implements UsageSink {
  readonly name = 'acceptor-port';
  readonly recordOnly = true;
  private readonly port: Postable;

  constructor(port: Postable) {
    this.port = port;
  }

  write(_line: string, record: UsageRecord): void {
    this.port.postMessage({ t: 'usage', r: record } satisfies ToMain);
  }

  async flush(): Promise<void> {}

  async close(): Promise<void> {}
}
