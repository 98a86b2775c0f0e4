// Stops accepting while the process is at its open-file limit, and starts again once descriptors are free.
// At the limit uSockets' listen socket stays readable (handshakes wait in its accept queue) while accept()
// fails with EMFILE, so its loop turns without pause and starves every stream on the thread (measured
// 0.6-0.8 s of CPU per second with one thread, 1.5 s per second with two). Closing the listen socket stops
// that; re-listening on the same port once `margin` descriptors are free resumes.
//
// Detection: every PROBE_INTERVAL_MS this thread opens /dev/null (as many times as there are acceptor threads,
// `pauseBelow`) and closes it. EMFILE (or ENFILE) before that many means the process is out of descriptors,
// less the listen sockets other threads have closed. It needs no descriptor of its own to answer, which is the point: reading
// /proc/self/fd needs one. Cost, measured: 2.6 µs for the open and close, 5 times a second per thread; at the
// limit the failing open costs 7.8 µs (Node builds an Error). While paused, a probe opens up to `margin`
// descriptors, stopping at the first EMFILE (the usual answer while idle connections still hold them), and
// closes them in the same synchronous turn: 0.4 ms for 256. Those descriptors are held for that turn only; a
// connect or open on another thread at that instant could fail with EMFILE, as it could anyway at the limit.
// Between the process running out and the next probe (up to PROBE_INTERVAL_MS) uSockets still spins.
// What clients see: the kernel resets the handshakes waiting in a listen socket's accept queue when it closes
// (net.ipv4.tcp_migrate_req 0, the default; with 1 they move to another thread's socket that still listens),
// and refuses new ones while no socket listens on the port. Accepted connections are untouched.
// Thread: whichever runs the uWS app (main, or each acceptor thread). Never on the request path.
import { closeSync, openSync, readFileSync } from 'node:fs';

export const PROBE_INTERVAL_MS = 200;
const PROBE_PATH = '/dev/null';

export interface ListenGuardHooks {
  /** Closes the listen socket. */
  close(): void;
  /** Listens again on the same host and port; false when the bind failed (port taken). */
  listen(): boolean;
  /** Called once per pause (log and count). */
  paused(margin: number): void;
  resumed(free: number): void;
  /** A re-listen failed; retried on the next probe. `attempt` counts failures since the pause. */
  relistenFailed(attempt: number): void;
  /** The probe itself cannot work here (no /dev/null): the guard stops. */
  unavailable(reason: string): void;
}

/** The soft RLIMIT_NOFILE from /proc/self/limits (read once at setup, while a descriptor is free); 1024 if unreadable. */
export function openFileLimit(): number {
  try {
    const m = /^Max open files\s+(\d+|unlimited)/m.exec(readFileSync('/proc/self/limits', 'latin1'));
    if (m && m[1] !== 'unlimited') return Number(m[1]);
  } catch {
    // not Linux: the default soft limit of most systems
  }
  return 1024;
}

/**
 * Descriptors to have free before listening again: 1/16 of the limit, at least 32 (one probe turn of new
 * connections must not put the process straight back at the limit), at most 256 (the cost of a paused probe).
 */
export function resumeMargin(limit: number): number {
  return Math.min(256, Math.max(32, Math.floor(limit / 16)));
}

const FULL = -1;
const BROKEN = -2;

export class ListenGuard {
  private timer: NodeJS.Timeout | null = null;
  private isPaused = false;
  private failures = 0;
  private readonly held: number[] = [];

  /**
   * `pauseBelow`: pause when fewer descriptors than this are free. With N acceptor threads it is N: each
   * thread that pauses closes its listen socket and so frees one descriptor, which a thread probing after it
   * would otherwise find free and keep listening on (a thread whose accept queue is empty never takes it),
   * while the process has nothing left for the connections that thread would accept next.
   */
  constructor(private readonly hooks: ListenGuardHooks, readonly margin = resumeMargin(openFileLimit()), private readonly intervalMs = PROBE_INTERVAL_MS, private readonly pauseBelow = 1) {}

  start(): void {
    if (this.timer !== null) return;
    this.timer = setInterval(() => this.probe(), this.intervalMs);
    this.timer.unref();
  }

  /** No further pause or re-listen (shutdown): the caller closes the listen socket itself. */
  stop(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }

  get paused(): boolean {
    return this.isPaused;
  }

  /** One probe; the timer calls it, tests may too. */
  probe(): void {
    if (!this.isPaused) {
      const free = this.free(this.pauseBelow);
      if (free === BROKEN) return;
      if (free >= this.pauseBelow) return;
      this.hooks.close();
      this.isPaused = true;
      this.failures = 0;
      this.hooks.paused(this.margin);
      return;
    }
    const free = this.free(this.margin);
    if (free !== BROKEN && free < this.margin) return;
    if (this.hooks.listen()) {
      this.isPaused = false;
      this.hooks.resumed(free);
    } else {
      this.hooks.relistenFailed(++this.failures);
    }
  }

  /** Descriptors free, counted up to `upTo` by opening /dev/null; every one is closed before returning. */
  private free(upTo: number): number {
    const held = this.held;
    let result = 0;
    try {
      while (held.length < upTo) held.push(openSync(PROBE_PATH, 'r'));
      result = held.length;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'EMFILE' || code === 'ENFILE') {
        result = held.length === 0 ? FULL : held.length;
      } else {
        this.stop();
        this.hooks.unavailable(`cannot open ${PROBE_PATH}: ${code ?? String(err)}`);
        result = BROKEN;
      }
    } finally {
      for (const fd of held) closeSync(fd);
      held.length = 0;
    }
    return result === FULL ? 0 : result;
  }
}
