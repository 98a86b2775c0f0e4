// Writes one streamed response's frames to the socket as the engine produces them, and cuts the connection
// after N token frames (the `die_mid_stream` fault). The `slow` fault is not here: the engine itself holds a
// slow request between tokens (EngineRequestSpec.tokenDelayMs), so the request stays in the engine for as long
// as its stream runs. Thread: main (mock process). On the per-token path: one write, no queue, no timer.
import type { ServerResponse } from 'node:http';

export class FrameWriter {
  private tokensWritten = 0;
  private dead = false;

  /**
   * @param dieAfterTokens destroy the socket once this many token frames were written (-1 = never)
   * @param onDie called once when the writer kills the connection on purpose
   */
  constructor(private readonly res: ServerResponse, private readonly dieAfterTokens: number, private readonly onDie: () => void) {}

  get closed(): boolean {
    return this.dead || this.res.destroyed;
  }

  /** A token frame (counts toward die_mid_stream). */
  token(frame: string): void {
    this.write(frame, true, false);
  }

  /** A non-token frame (role chunk, usage, [DONE]). */
  other(frame: string): void {
    this.write(frame, false, false);
  }

  /** Last bytes of the response, then end(). */
  finish(frame: string): void {
    this.write(frame, false, true);
  }

  private write(frame: string, isToken: boolean, end: boolean): void {
    if (this.closed) return;
    // A response shorter than after_tokens still dies: before its [DONE], after its last token.
    if (this.dieAfterTokens >= 0 && (end || (isToken && this.tokensWritten >= this.dieAfterTokens))) {
      this.kill();
      return;
    }
    if (isToken) this.tokensWritten++;
    if (end) this.res.end(frame);
    else this.res.write(frame);
  }

  private kill(): void {
    if (this.dead) return;
    this.dead = true;
    // destroySoon: frames already written still reach the client (even the one written in this same tick),
    // then the connection closes with the chunked body unfinished, which a client sees as a broken stream.
    const socket = this.res.socket;
    if (socket) socket.destroySoon();
    else this.res.destroy();
    this.onDie();
  }
}
