// A client sink for relay tests that keeps everything written as one string and counts ends; `full` makes
// write() answer false, as a backpressured uWS response does. Nothing is ever aborted.
import type { ClientSink, HeaderList } from '../../../src/relay/client-sink.ts';

export class TextSink implements ClientSink {
  aborted = false;
  started = true;
  ends = 0;
  bytes = '';
  full = false;
  begin(_s: number, _h: HeaderList): void {}
  write(c: Uint8Array | string): boolean {
    this.bytes += typeof c === 'string' ? c : Buffer.from(c).toString();
    return !this.full;
  }
  end(c?: Uint8Array | string): void {
    if (c !== undefined) this.write(c);
    this.ends++;
  }
  onDrain(): void {}
  setAbortHandler(): void {}
  cork(fn: () => void): void {
    fn();
  }
}
