// Writes one response's frames to the socket, optionally pacing token frames `delayMs` apart (the `slow`
// fault) and cutting the connection after N token frames (the `die_mid_stream` fault). Thread: main (mock
// process). On the per-token path: without faults a frame is written straight through, no queue, no timer.
import type { ServerResponse } from 'node:http';

export class PacedWriter {
  private readonly queue: Array<{ frame: string; isToken: boolean; end: boolean }> = [];
  private timer: NodeJS.Timeout | null = null;
  private lastTokenWriteMs = -Infinity;
  private tokensWritten = 0;
  private dead = false;

  /**
   * @param delayMs extra delay between token frames (0 = none)
   * @param dieAfterTokens destroy the socket once this many token frames were written (-1 = never)
   * @param onDie called once when the writer kills the connection on purpose
   */
  constructor(private readonly res: ServerResponse, private readonly delayMs: number, private readonly dieAfterTokens: number, private readonly onDie: () => void) {}

  get closed(): boolean {
    return this.dead || this.res.destroyed;
  }

  /** A token frame (counts toward pacing and die_mid_stream). */
  token(frame: string): void {
    this.push(frame, true, false);
  }

  /** A non-token frame (role chunk, usage, [DONE]); never delayed on its own. */
  other(frame: string): void {
    this.push(frame, false, false);
  }

  /** Last bytes of the response, then end(). */
  finish(frame: string): void {
    this.push(frame, false, true);
  }

  private push(frame: string, isToken: boolean, end: boolean): void {
    if (this.closed) return;
    if (this.delayMs === 0 && this.queue.length === 0) {
      this.write(frame, isToken, end);
      return;
    }
    this.queue.push({ frame, isToken, end });
    this.drain();
  }

  private drain(): void {
    if (this.timer !== null) return;
    while (this.queue.length > 0 && !this.closed) {
      const next = this.queue[0]!;
      if (next.isToken) {
        const waitMs = this.lastTokenWriteMs + this.delayMs - performance.now();
        if (waitMs > 0) {
          this.timer = setTimeout(() => {
            this.timer = null;
            this.drain();
          }, waitMs);
          return;
        }
      }
      this.queue.shift();
      this.write(next.frame, next.isToken, next.end);
    }
  }

  private write(frame: string, isToken: boolean, end: boolean): void {
    // A response shorter than after_tokens still dies: before its [DONE], after its last token.
    if (this.dieAfterTokens >= 0 && (end || (isToken && this.tokensWritten >= this.dieAfterTokens))) {
      this.kill();
      return;
    }
    if (isToken) {
      this.tokensWritten++;
      this.lastTokenWriteMs = performance.now();
    }
    if (end) this.res.end(frame);
    else this.res.write(frame);
  }

  private kill(): void {
    if (this.dead) return;
    this.dead = true;
    this.queue.length = 0;
    // destroySoon: frames already written still reach the client (even the one written in this same tick),
    // then the connection closes with the chunked body unfinished, which a client sees as a broken stream.
    const socket = this.res.socket;
    if (socket) socket.destroySoon();
    else this.res.destroy();
    this.onDie();
  }

  /** Stops timers (client went away). */
  dispose(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    this.queue.length = 0;
  }
}
