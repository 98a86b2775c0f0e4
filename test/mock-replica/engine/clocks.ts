// The two Clock implementations the mock engine runs on. RealClock is wall time (performance.now, setTimeout,
// setImmediate for due-now timers) for the HTTP mock; VirtualClock is hand-advanced time for engine tests and
// a fleet simulator, where a whole load test runs in milliseconds of CPU.
// Thread: main of the mock process (or of the test). Hot path: one setTimer per engine step, nothing per token.
// Time scaling is NOT done here: the engine multiplies its step durations by EngineOptions.timeScale, so both
// clocks keep plain milliseconds and histograms report the time a client actually sees.
import type { Clock } from './types.ts';

type RealHandle = { kind: 'timeout'; t: NodeJS.Timeout } | { kind: 'immediate'; t: NodeJS.Immediate };

/** Wall-clock time. Due-now timers use setImmediate: setTimeout(0) costs a whole millisecond in Node. */
export class RealClock implements Clock {
  now(): number {
    return performance.now();
  }

  setTimer(delayMs: number, fn: () => void): unknown {
    if (delayMs < 0.5) return { kind: 'immediate', t: setImmediate(fn) } satisfies RealHandle;
    return { kind: 'timeout', t: setTimeout(fn, delayMs) } satisfies RealHandle;
  }

  clearTimer(handle: unknown): void {
    const h = handle as RealHandle | null | undefined;
    if (!h) return;
    if (h.kind === 'timeout') clearTimeout(h.t);
    else clearImmediate(h.t);
  }
}

interface VirtualTimer {
  atMs: number;
  seq: number;
  fn: (() => void) | null;
}

/**
 * Time that moves only when told to. Timers fire in (due time, creation order); a timer set while others fire
 * runs in the same advance() if it falls due within it. Deterministic: no wall time is ever read.
 */
export class VirtualClock implements Clock {
  private nowMs: number;
  private seq = 0;
  /** Binary min-heap on (atMs, seq). */
  private readonly heap: VirtualTimer[] = [];

  constructor(startMs = 0) {
    this.nowMs = startMs;
  }

  now(): number {
    return this.nowMs;
  }

  setTimer(delayMs: number, fn: () => void): unknown {
    const timer: VirtualTimer = { atMs: this.nowMs + Math.max(0, delayMs), seq: this.seq++, fn };
    this.push(timer);
    return timer;
  }

  clearTimer(handle: unknown): void {
    const timer = handle as VirtualTimer | null | undefined;
    if (timer) timer.fn = null; // lazily dropped when it reaches the top of the heap
  }

  /** Pending (not cleared) timers. */
  get pendingTimers(): number {
    let n = 0;
    for (const t of this.heap) if (t.fn) n++;
    return n;
  }

  /** Moves time forward by `ms`, firing every timer that falls due on the way, in order. */
  advance(ms: number): void {
    const endMs = this.nowMs + ms;
    for (;;) {
      const top = this.peekLive();
      if (!top || top.atMs > endMs) break;
      this.fireTop();
    }
    this.nowMs = endMs;
  }

  /**
   * Fires timers until none is left, jumping time to each. Throws after `maxTimers` firings, which means
   * something re-arms itself forever (an engine with work it can never schedule would do that).
   */
  runUntilIdle(maxTimers = 10_000_000): void {
    for (let fired = 0; this.peekLive(); fired++) {
      if (fired >= maxTimers) throw new Error(`VirtualClock.runUntilIdle: still busy after ${maxTimers} timers`);
      this.fireTop();
    }
  }

  /** Fires timers until `done()` is true (checked after each firing) or none is left. */
  runUntil(done: () => boolean, maxTimers = 10_000_000): void {
    for (let fired = 0; !done() && this.peekLive(); fired++) {
      if (fired >= maxTimers) throw new Error(`VirtualClock.runUntil: condition not met after ${maxTimers} timers`);
      this.fireTop();
    }
  }

  private fireTop(): void {
    const timer = this.pop();
    if (!timer?.fn) return;
    this.nowMs = Math.max(this.nowMs, timer.atMs);
    const fn = timer.fn;
    timer.fn = null;
    fn();
  }

  private peekLive(): VirtualTimer | undefined {
    while (this.heap.length > 0 && this.heap[0]!.fn === null) this.pop();
    return this.heap[0];
  }

  private less(a: VirtualTimer, b: VirtualTimer): boolean {
    return a.atMs < b.atMs || (a.atMs === b.atMs && a.seq < b.seq);
  }

  private push(t: VirtualTimer): void {
    const h = this.heap;
    h.push(t);
    let i = h.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!this.less(h[i]!, h[p]!)) break;
      [h[i], h[p]] = [h[p]!, h[i]!];
      i = p;
    }
  }

  private pop(): VirtualTimer | undefined {
    const h = this.heap;
    const top = h[0];
    const last = h.pop();
    if (h.length > 0 && last) {
      h[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < h.length && this.less(h[l]!, h[m]!)) m = l;
        if (r < h.length && this.less(h[r]!, h[m]!)) m = r;
        if (m === i) break;
        [h[i], h[m]] = [h[m]!, h[i]!];
        i = m;
      }
    }
    return top;
  }
}
