// The time source of every stage that waits or ages state (admission queue, prefix index recency, learned
// rates): the gateway runs on WallClock; the fleet simulator drives the same code with a virtual clock.
// The shape matches the mock engine's Clock, so one virtual clock serves both in the simulator.
// Thread: any. Hot path: now() per decision (one performance.now() or one field read).

export interface Clock {
  /** Milliseconds, monotonic. */
  now(): number;
  /** Calls fn once after `delayMs` of this clock's time. */
  setTimer(delayMs: number, fn: () => void): unknown;
  clearTimer(handle: unknown): void;
}

/** performance.now() and unref'd setTimeout: a pending queue deadline never keeps a process alive. */
export const WallClock: Clock = {
  now: () => performance.now(),
  setTimer(delayMs, fn) {
    const t = setTimeout(fn, delayMs);
    t.unref();
    return t;
  },
  clearTimer(handle) {
    clearTimeout(handle as NodeJS.Timeout);
  },
};
