// The gateway's own ledger of work it has in flight on each replica slot. Scraped metrics lag by a scrape
// interval; this does not: it changes synchronously at dispatch, first token, each relayed token, and end.
// A reply's length is not known at dispatch: a request carrying a forecast (src/gpu-time/reply-length/) counts
// its expected length as outstanding work and its KV figure (a high quantile) as reserved KV, both at most
// max_tokens; when the stream runs past either, it is revised from the forecast given the tokens produced
// (a reply past its reservation holds KV nobody budgeted, and one past its expectation still has work left).
// Without a forecast max_tokens is the length.
// Thread: any. Backed by a SharedArrayBuffer of Int32 cells updated with Atomics so every acceptor thread
// sees the same figures. Hot path: a handful of Atomics.add per request event, no allocation; per relayed
// chunk two comparisons, and a revision (a pass over the forecast's histogram row) only as the stream
// passes its figures, a few times in its life.

/** Cells per slot. Token counts fit Int32 (256 requests x 131,072 tokens = 33.5M). */
export const LEDGER_INFLIGHT = 0; //         requests dispatched and not ended
export const LEDGER_PREFILL_TOKENS = 1; //   prompt tokens dispatched whose first token has not come back
export const LEDGER_RUNNING = 2; //          requests past their first token (decoding)
export const LEDGER_OUTSTANDING_TOKENS = 3; // prompt tokens not yet prefilled + output tokens expected and not yet generated
export const LEDGER_RESERVED_BLOCKS = 4; //  KV blocks the gateway budgets these requests to hold at their peak
export const LEDGER_OUTPUT_TOKENS = 5; //    output tokens relayed so far by in-flight requests
/** KV blocks ever reserved by dispatches here: a wrapping Int32 counter, compared by difference (`| 0`) so a
 * reader can tell how many blocks were dispatched since it last looked (e.g. since a scrape). Never decremented. */
export const LEDGER_DISPATCHED_BLOCKS = 6;
export const LEDGER_FIELDS = 7;

/** The ledger's view of a reply forecast (src/gpu-time/reply-length/reply-forecast.ts), per sequence. */
export interface LedgerReply {
  readonly kvTokens: number;
  readonly meanTokens: number;
  kvAfter(produced: number): number;
  meanAfter(produced: number): number;
}

/** What the pipeline remembers about one dispatch so that every later update undoes exactly what it did. */
export interface LedgerEntry {
  slot: number;
  /** Prompt tokens the replica must prefill (the prompt less what its prefix cache is predicted to hold). */
  promptTokens: number;
  /** The whole prompt (its KV is held, cached or not). */
  wholePrompt: number;
  /** max_tokens × n: no figure exceeds it. */
  maxTokens: number;
  /** Output tokens counted as outstanding work, and as reserved KV (× n). */
  expectTokens: number;
  reserveTokens: number;
  blocks: number;
  blockSize: number;
  outputTokens: number;
  reply: LedgerReply | null;
  sequences: number;
  firstTokenSeen: boolean;
  ended: boolean;
}

export class InflightLedger {
  readonly buffer: SharedArrayBuffer;
  private readonly cells: Int32Array;
  readonly slots: number;
  /**
   * Every reader and writer is on this thread (the fleet simulator's runs): cells change with plain
   * arithmetic, wrapping as Atomics does, not through Atomics calls, which V8 does not inline (two a relayed
   * token; a round-robin run under Expediter's admission spent 12 % of its CPU in tokens()). The live
   * gateway's acceptor threads share the buffer: false.
   */
  private readonly sameThread: boolean;

  constructor(slotsOrBuffer: number | SharedArrayBuffer, sameThread = false) {
    this.sameThread = sameThread;
    this.buffer = typeof slotsOrBuffer === 'number'
      ? new SharedArrayBuffer(slotsOrBuffer * LEDGER_FIELDS * 4)
      : slotsOrBuffer;
    this.cells = new Int32Array(this.buffer);
    this.slots = this.cells.length / LEDGER_FIELDS;
  }

  get(slot: number, field: number): number {
    const i = slot * LEDGER_FIELDS + field;
    return this.sameThread ? this.cells[i]! : Atomics.load(this.cells, i);
  }

  /** cells[i] += v, wrapping at 32 bits (Atomics.add's result, without the call on one thread). */
  private add(i: number, v: number): void {
    if (this.sameThread) this.cells[i] = (this.cells[i]! + v) | 0;
    else Atomics.add(this.cells, i, v);
  }

  private sub(i: number, v: number): void {
    if (this.sameThread) this.cells[i] = (this.cells[i]! - v) | 0;
    else Atomics.sub(this.cells, i, v);
  }

  /**
   * A request sent to `slot`. Its KV reservation covers the whole prompt (cached blocks are held too) plus its
   * reply's KV figure; its prefill work is `uncachedPromptTokens` (default: the whole prompt). `maxTokens` is
   * max_tokens × `sequences`; with no `reply` forecast it is the reply's length.
   */
  dispatch(slot: number, promptTokens: number, maxTokens: number, blockSize: number, uncachedPromptTokens = promptTokens,
    reply: LedgerReply | null = null, sequences = 1): LedgerEntry {
    return this.dispatchInto(newLedgerEntry(), slot, promptTokens, maxTokens, blockSize, uncachedPromptTokens, reply, sequences);
  }

  /**
   * dispatch() into an entry the caller keeps: the fleet simulator's request is its own entry, so a relayed
   * token loads one object, not a request and then its entry (a cache miss each, per token). `e` must be new
   * or ended: nothing may still update it for an earlier dispatch.
   */
  dispatchInto(e: LedgerEntry, slot: number, promptTokens: number, maxTokens: number, blockSize: number, uncachedPromptTokens = promptTokens,
    reply: LedgerReply | null = null, sequences = 1): LedgerEntry {
    const base = slot * LEDGER_FIELDS;
    const expect = reply === null ? maxTokens : capped(reply.meanTokens * sequences, maxTokens);
    const reserve = reply === null ? maxTokens : capped(reply.kvTokens * sequences, maxTokens);
    const blocks = Math.ceil((promptTokens + reserve) / blockSize);
    const prefill = uncachedPromptTokens;
    this.add(base + LEDGER_INFLIGHT, 1);
    this.add(base + LEDGER_PREFILL_TOKENS, prefill);
    this.add(base + LEDGER_OUTSTANDING_TOKENS, prefill + expect);
    this.add(base + LEDGER_RESERVED_BLOCKS, blocks);
    this.add(base + LEDGER_DISPATCHED_BLOCKS, blocks);
    e.slot = slot;
    e.promptTokens = prefill;
    e.wholePrompt = promptTokens;
    e.maxTokens = maxTokens;
    e.expectTokens = expect;
    e.reserveTokens = reserve;
    e.blocks = blocks;
    e.blockSize = blockSize;
    e.outputTokens = 0;
    e.reply = reply;
    e.sequences = sequences;
    e.firstTokenSeen = false;
    e.ended = false;
    return e;
  }

  firstToken(e: LedgerEntry): void {
    if (e.firstTokenSeen || e.ended) return;
    e.firstTokenSeen = true;
    const base = e.slot * LEDGER_FIELDS;
    this.sub(base + LEDGER_PREFILL_TOKENS, e.promptTokens);
    this.sub(base + LEDGER_OUTSTANDING_TOKENS, e.promptTokens);
    this.add(base + LEDGER_RUNNING, 1);
  }

  /**
   * `n` more output tokens relayed; outstanding work shrinks by as much, never below the request's share. A
   * stream past its expected length or its KV figure gets both revised from its forecast, given what it has
   * produced (never above max_tokens).
   */
  tokens(e: LedgerEntry, n: number): void {
    if (e.ended || n <= 0) return;
    const room = e.expectTokens - e.outputTokens;
    const take = n < room ? n : room;
    e.outputTokens += n;
    const base = e.slot * LEDGER_FIELDS;
    this.add(base + LEDGER_OUTPUT_TOKENS, n);
    if (take > 0) this.sub(base + LEDGER_OUTSTANDING_TOKENS, take);
    const out = e.outputTokens;
    const reply = e.reply;
    if (reply === null) return;
    if (out >= e.expectTokens && e.expectTokens < e.maxTokens) {
      const expect = capped(Math.ceil(reply.meanAfter(out / e.sequences) * e.sequences), e.maxTokens);
      if (expect > out) this.add(base + LEDGER_OUTSTANDING_TOKENS, expect - out);
      e.expectTokens = expect > out ? expect : out;
    }
    if (out >= e.reserveTokens && e.reserveTokens < e.maxTokens) {
      const reserve = capped(Math.ceil(reply.kvAfter(out / e.sequences) * e.sequences), e.maxTokens);
      e.reserveTokens = reserve > out ? reserve : out;
      const blocks = Math.ceil((e.wholePrompt + e.reserveTokens) / e.blockSize);
      if (blocks > e.blocks) {
        // The growth is KV this replica holds beyond what was dispatched: a reader since the last scrape counts it too.
        this.add(base + LEDGER_RESERVED_BLOCKS, blocks - e.blocks);
        this.add(base + LEDGER_DISPATCHED_BLOCKS, blocks - e.blocks);
        e.blocks = blocks;
      }
    }
  }

  /** Removes everything the entry still holds. Idempotent: completion, error and abort may all call it. */
  end(e: LedgerEntry): void {
    if (e.ended) return;
    const base = e.slot * LEDGER_FIELDS;
    if (!e.firstTokenSeen) {
      this.sub(base + LEDGER_PREFILL_TOKENS, e.promptTokens);
      this.sub(base + LEDGER_OUTSTANDING_TOKENS, e.promptTokens);
    } else {
      this.sub(base + LEDGER_RUNNING, 1);
    }
    const usedOutput = e.outputTokens < e.expectTokens ? e.outputTokens : e.expectTokens;
    this.sub(base + LEDGER_OUTSTANDING_TOKENS, e.expectTokens - usedOutput);
    this.sub(base + LEDGER_OUTPUT_TOKENS, e.outputTokens);
    this.sub(base + LEDGER_RESERVED_BLOCKS, e.blocks);
    this.sub(base + LEDGER_INFLIGHT, 1);
    e.ended = true;
  }

  /** Zeroes a slot before it is reused for another replica. */
  resetSlot(slot: number): void {
    const base = slot * LEDGER_FIELDS;
    for (let f = 0; f < LEDGER_FIELDS; f++) Atomics.store(this.cells, base + f, 0);
  }
}

/** An entry no dispatch has filled yet (ended: every update is a no-op until dispatchInto fills it). */
export function newLedgerEntry(): LedgerEntry {
  return {
    slot: -1, promptTokens: 0, wholePrompt: 0, maxTokens: 0, expectTokens: 0, reserveTokens: 0, blocks: 0, blockSize: 16,
    outputTokens: 0, reply: null, sequences: 1, firstTokenSeen: false, ended: true,
  };
}

function capped(x: number, cap: number): number {
  const r = Math.ceil(x);
  return r < cap ? r : cap;
}
