// The admission queue of one pool: entries ordered by deadline, earliest first, arrival order among equal
// deadlines. A sorted array: admission.max_queued_requests bounds it (1,024 by default), insertion is a
// binary search plus one splice (a memmove of at most a few KiB), and the pump walks it from the head, which
// an array does best. Also keeps the sum of the queued reservations, which the budget subtracts.
// Thread: the acceptor. Hot path: only under overload (a request that does not fit at once).

export interface QueuedEntry {
  readonly deadlineMs: number;
  readonly seq: number;
  /** Tokens this request would take (its reservation less its predicted cached prompt). */
  needTokens: number;
}

export class DeadlineQueue<E extends QueuedEntry> {
  private readonly items: E[] = [];
  private tokens = 0;

  get length(): number {
    return this.items.length;
  }

  /** Σ needTokens of every queued entry. */
  get queuedTokens(): number {
    return this.tokens;
  }

  at(i: number): E | undefined {
    return this.items[i];
  }

  /** Inserts in deadline order; returns the position it took (0 = head). */
  insert(e: E): number {
    const items = this.items;
    let lo = 0;
    let hi = items.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const m = items[mid]!;
      if (m.deadlineMs < e.deadlineMs || (m.deadlineMs === e.deadlineMs && m.seq < e.seq)) lo = mid + 1;
      else hi = mid;
    }
    items.splice(lo, 0, e);
    this.tokens += e.needTokens;
    return lo;
  }

  /** Removes `e` if queued; false when it was not. */
  remove(e: E): boolean {
    const i = this.items.indexOf(e);
    if (i === -1) return false;
    this.items.splice(i, 1);
    this.tokens -= e.needTokens;
    if (this.items.length === 0) this.tokens = 0; // no float drift survives an empty queue
    return true;
  }

  /** Changes a queued entry's need (a re-route predicted another cached prefix), keeping the sum right. */
  setNeed(e: E, needTokens: number): void {
    this.tokens += needTokens - e.needTokens;
    e.needTokens = needTokens;
  }

  /** Σ needTokens of the entries that would be served before a new entry with this deadline. */
  tokensAhead(deadlineMs: number): number {
    const items = this.items;
    let sum = 0;
    for (let i = 0; i < items.length; i++) {
      const m = items[i]!;
      if (m.deadlineMs > deadlineMs) break;
      sum += m.needTokens;
    }
    return sum;
  }

  /** The latest deadline among the entries served before a new entry with this deadline (NaN with none): by then all of them have left. */
  lastDeadlineAhead(deadlineMs: number): number {
    const items = this.items;
    let last = Number.NaN;
    for (let i = 0; i < items.length && items[i]!.deadlineMs <= deadlineMs; i++) last = items[i]!.deadlineMs;
    return last;
  }

  /** Copies the entries into `out` (reused by the caller), head first: the pump walks a snapshot because
   *  the callbacks it runs may enqueue or cancel. */
  snapshot(out: E[]): E[] {
    out.length = 0;
    const items = this.items;
    for (let i = 0; i < items.length; i++) out.push(items[i]!);
    return out;
  }
}
