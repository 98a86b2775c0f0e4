// Coalesces the messages one thread posts to another within one event-loop turn into a single postMessage:
// under load an acceptor's quota acquires, settles and usage records of many requests cross together, and the
// receiving thread wakes once for them instead of once each (a wake-up is a futex/eventfd round trip and a
// structured-clone header). Order is kept: every message between two threads goes through one outbox.
// Thread: both sides of an acceptor's port. Hot path: postMessage() is an array append; the flush runs in the same
// loop iteration (setImmediate: after this turn's I/O callbacks), so it adds no timer delay.

export interface Postable {
  postMessage(value: unknown): void;
}

/** A batch on the wire; a lone message goes as itself. */
export interface Batch<M> {
  t: 'batch';
  m: M[];
}

export class Outbox<M> implements Postable {
  private readonly target: Postable;
  private queue: M[] = [];
  private scheduled = false;

  constructor(target: Postable) {
    this.target = target;
  }

  postMessage(msg: M): void {
    this.queue.push(msg);
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => this.flush());
  }

  /** Sends what is queued now (also called before the port closes). */
  flush(): void {
    this.scheduled = false;
    const q = this.queue;
    if (q.length === 0) return;
    this.queue = [];
    this.target.postMessage(q.length === 1 ? q[0] : ({ t: 'batch', m: q } satisfies Batch<M>));
  }
}

/** Calls `handle` for each message of a batch, or for a lone message. */
export function unbatch<M>(data: M | Batch<M>, handle: (msg: M) => void): void {
  if ((data as Batch<M>).t === 'batch') for (const m of (data as Batch<M>).m) handle(m);
  else handle(data as M);
}
