// The gateway's own ledger of work it has in flight on each replica slot. Scraped metrics lag by a scrape
// interval; this does not: it changes synchronously at dispatch, first token, each relayed token, and end.
// Thread: any. Backed by a SharedArrayBuffer of Int32 cells updated with Atomics so every acceptor thread
// sees the same figures. Hot path: a handful of Atomics.add per request event, no allocation.

/** Cells per slot. Token counts fit Int32 (256 requests x 131,072 tokens = 33.5M). */
export const LEDGER_INFLIGHT = 0; //         requests dispatched and not ended
export const LEDGER_PREFILL_TOKENS = 1; //   prompt tokens dispatched whose first token has not come back
export const LEDGER_RUNNING = 2; //          requests past their first token (decoding)
export const LEDGER_OUTSTANDING_TOKENS = 3; // prompt tokens not yet prefilled + output tokens not yet generated (max_tokens based)
export const LEDGER_RESERVED_BLOCKS = 4; //  KV blocks the gateway expects these requests to hold at their peak
export const LEDGER_OUTPUT_TOKENS = 5; //    output tokens relayed so far by in-flight requests
/** KV blocks ever reserved by dispatches here: a wrapping Int32 counter, compared by difference (`| 0`) so a
 * reader can tell how many blocks were dispatched since it last looked (e.g. since a scrape). Never decremented. */
export const LEDGER_DISPATCHED_BLOCKS = 6;
export const LEDGER_FIELDS = 7;

/** What the pipeline remembers about one dispatch so that every later update undoes exactly what it did. */
export interface LedgerEntry {
  slot: number;
  /** Prompt tokens the replica must prefill (the prompt less what its prefix cache is predicted to hold). */
  promptTokens: number;
  maxTokens: number;
  blocks: number;
  outputTokens: number;
  firstTokenSeen: boolean;
  ended: boolean;
}

export class InflightLedger {
  readonly buffer: SharedArrayBuffer;
  private readonly cells: Int32Array;
  readonly slots: number;

  constructor(slotsOrBuffer: number | SharedArrayBuffer) {
    this.buffer = typeof slotsOrBuffer === 'number'
      ? new SharedArrayBuffer(slotsOrBuffer * LEDGER_FIELDS * 4)
      : slotsOrBuffer;
    this.cells = new Int32Array(this.buffer);
    this.slots = this.cells.length / LEDGER_FIELDS;
  }

  get(slot: number, field: number): number {
    return Atomics.load(this.cells, slot * LEDGER_FIELDS + field);
  }

  /**
   * A request sent to `slot`. Its KV reservation covers the whole prompt plus maxTokens (cached blocks are held
   * too); its prefill work is `uncachedPromptTokens` (default: the whole prompt).
   */
  dispatch(slot: number, promptTokens: number, maxTokens: number, blockSize: number, uncachedPromptTokens = promptTokens): LedgerEntry {
    const base = slot * LEDGER_FIELDS;
    const blocks = Math.ceil((promptTokens + maxTokens) / blockSize);
    const prefill = uncachedPromptTokens;
    Atomics.add(this.cells, base + LEDGER_INFLIGHT, 1);
    Atomics.add(this.cells, base + LEDGER_PREFILL_TOKENS, prefill);
    Atomics.add(this.cells, base + LEDGER_OUTSTANDING_TOKENS, prefill + maxTokens);
    Atomics.add(this.cells, base + LEDGER_RESERVED_BLOCKS, blocks);
    Atomics.add(this.cells, base + LEDGER_DISPATCHED_BLOCKS, blocks);
    return { slot, promptTokens: prefill, maxTokens, blocks, outputTokens: 0, firstTokenSeen: false, ended: false };
  }

  firstToken(e: LedgerEntry): void {
    if (e.firstTokenSeen || e.ended) return;
    e.firstTokenSeen = true;
    const base = e.slot * LEDGER_FIELDS;
    Atomics.sub(this.cells, base + LEDGER_PREFILL_TOKENS, e.promptTokens);
    Atomics.sub(this.cells, base + LEDGER_OUTSTANDING_TOKENS, e.promptTokens);
    Atomics.add(this.cells, base + LEDGER_RUNNING, 1);
  }

  /** `n` more output tokens relayed; outstanding work shrinks by as much, never below the request's share. */
  tokens(e: LedgerEntry, n: number): void {
    if (e.ended || n <= 0) return;
    const room = e.maxTokens - e.outputTokens;
    const take = n < room ? n : room;
    e.outputTokens += n;
    const base = e.slot * LEDGER_FIELDS;
    Atomics.add(this.cells, base + LEDGER_OUTPUT_TOKENS, n);
    if (take > 0) Atomics.sub(this.cells, base + LEDGER_OUTSTANDING_TOKENS, take);
  }

  /** Removes everything the entry still holds. Idempotent: completion, error and abort may all call it. */
  end(e: LedgerEntry): void {
    if (e.ended) return;
    const base = e.slot * LEDGER_FIELDS;
    if (!e.firstTokenSeen) {
      Atomics.sub(this.cells, base + LEDGER_PREFILL_TOKENS, e.promptTokens);
      Atomics.sub(this.cells, base + LEDGER_OUTSTANDING_TOKENS, e.promptTokens);
    } else {
      Atomics.sub(this.cells, base + LEDGER_RUNNING, 1);
    }
    const usedOutput = e.outputTokens < e.maxTokens ? e.outputTokens : e.maxTokens;
    Atomics.sub(this.cells, base + LEDGER_OUTSTANDING_TOKENS, e.maxTokens - usedOutput);
    Atomics.sub(this.cells, base + LEDGER_OUTPUT_TOKENS, e.outputTokens);
    Atomics.sub(this.cells, base + LEDGER_RESERVED_BLOCKS, e.blocks);
    Atomics.sub(this.cells, base + LEDGER_INFLIGHT, 1);
    e.ended = true;
  }

  /** Zeroes a slot before it is reused for another replica. */
  resetSlot(slot: number): void {
    const base = slot * LEDGER_FIELDS;
    for (let f = 0; f < LEDGER_FIELDS; f++) Atomics.store(this.cells, base + f, 0);
  }
}
