// What the upstream attempt (src/pipeline/upstream-attempt.ts) needs from a stream relay, whichever wire
// format it relays: chat and completions chunks (sse-relay.ts) or Responses API events (responses-relay.ts).
// Thread: main. Types only.
import type { Rejection } from '../errors/rejection.ts';
import type { UsageNumbers } from './usage-numbers.ts';

export interface StreamRelay {
  /** Output token events relayed so far (the output tokens of a stream that was cut). */
  readonly tokens: number;
  /** The replica's exact counts, once it sent them. */
  readonly usage: UsageNumbers | null;
  readonly finishReason: string | null;
  /** The stream reached its clean end ([DONE], or a terminal Responses event). */
  readonly sawDone: boolean;
  /** The replica sent an error event (the client's stream then ends with the gateway's). */
  readonly upstreamError: Rejection | null;
  /** The first output token has been relayed (TTFT); for chat and completions, the first event. */
  readonly sawFirstToken: boolean;
  /** Relays one upstream read; true when the client is backpressured. Called inside sink.cork(). */
  push(chunk: Buffer): boolean;
  /** Ends the client's stream with one error event. */
  fail(r: Rejection): void;
  /** Ends the client's stream after the upstream body ended. */
  close(): void;
  /** The reply text (for its block hashes); '' when not collected, null when unreadable. */
  replyText(): string | null;
}
