// The completions an acceptor has in flight, as a list threaded through their contexts: add and delete are four
// field writes, where a Set<RequestContext> hashes each context (an identity hash made on first use) and
// rehashes its table as entries come and go (`SetGrow` ≈ 0.3 % of the acceptor's samples at saturation, perf).
// Read only at shutdown (to abort what is left) and for the in-flight count.
// Thread: the acceptor's. Hot path: add and delete once per completion.
import type { RequestContext } from '../pipeline/request-context.ts';

export class InflightList {
  private head: RequestContext | null = null;
  private count = 0;

  get size(): number {
    return this.count;
  }

  add(ctx: RequestContext): void {
    ctx.inflightPrev = null;
    ctx.inflightNext = this.head;
    if (this.head !== null) this.head.inflightPrev = ctx;
    this.head = ctx;
    ctx.inflightLinked = true;
    this.count++;
  }

  /** Removes `ctx` if it is in the list (a second delete does nothing). */
  delete(ctx: RequestContext): void {
    if (!ctx.inflightLinked) return;
    ctx.inflightLinked = false;
    const prev = ctx.inflightPrev;
    const next = ctx.inflightNext;
    if (prev !== null) prev.inflightNext = next;
    else this.head = next;
    if (next !== null) next.inflightPrev = prev;
    ctx.inflightPrev = null;
    ctx.inflightNext = null;
    this.count--;
  }

  /** A copy: the caller may abort (and so delete) entries while it walks. */
  snapshot(): RequestContext[] {
    const out: RequestContext[] = [];
    for (let c = this.head; c !== null; c = c.inflightNext) out.push(c);
    return out;
  }
}
