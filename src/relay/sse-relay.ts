// Streams an upstream vLLM SSE body to the client event by event, as it arrives, with no buffering beyond a
// partial event split across two upstream chunks. Along the way it learns what billing and routing need: the
// first event (TTFT), the number of token events relayed (output tokens of a cancelled stream), the usage
// chunk (exact counts and cached tokens) and the finish reason. The usage chunk is removed when the client did
// not ask for it (the gateway always asks upstream). An upstream error event becomes one gateway error event
// and the stream ends without a [DONE].
// Thread: main. Hot path: per event one native search for its "\n\n" end and a byte compare of its tail (a
// plain chat token chunk, the common case, needs nothing more; others take two more searches); forwarded bytes
// are the upstream Buffer itself or a view of it (no copy), written inside one cork per upstream chunk.
// Measured (perf, 300-token streams): the relay's searches were 3.5 % of the gateway's CPU before the tail check.
// Opt-in (`collectText`, decided at setup: only when the routing policy extends its prefix index with finished
// replies): the reply text, for its block hashes. A plain chat token event costs a byte compare of 18 more
// tail bytes, a backward scan over its content to the opening quote and a copy of those bytes (no native
// call: in process about 0.6-0.8x what the relay spends on the event without it); other events one search
// for `"content":"` / `"text":"`; the text is decoded once, at the end (`npm run bench -- pipeline`, row
// "policy learns replies", prices the whole feature). Off: one boolean read per event.
import type { ClientSink } from './client-sink.ts';
import { errorEvent } from '../errors/openai-error-body.ts';
import type { Rejection } from '../errors/rejection.ts';
import { escapedAt, findJsonString, ReplyTextBuilder, type JsonStringSpan } from './json-string.ts';
import { usageNumbers } from './usage-numbers.ts';
import type { StreamRelay } from './stream-relay.ts';
import { EventRelay, startsWith } from './event-relay.ts';

const DONE = Buffer.from('data: [DONE]');
const ERROR_PREFIX = Buffer.from('data: {"error"');
const EMPTY_CHOICES = Buffer.from('"choices":[]');
const FINISH = Buffer.from('"finish_reason":"');
const CHAT_CONTENT = Buffer.from('"content":"');
/** What precedes PLAIN_TOKEN_TAIL in a delta that ends with its content: the closing quote is its first byte. */
const CONTENT_END = Buffer.from('"},"logprobs":null,');
const CONTENT_COLON = Buffer.from('"content":');
const COMPLETION_TEXT = Buffer.from('"text":"');
/**
 * How vLLM ends every chat token chunk that is neither the finish chunk nor the usage chunk
 * (docs/vllm-facts.md "Wire format": `..."logprobs":null,"finish_reason":null}]}`). An event ending so carries
 * no usage and no finish reason, so the two searches for them are skipped.
 */
const PLAIN_TOKEN_TAIL = Buffer.from('"finish_reason":null}]}\n\n');
/** Largest single SSE event accepted from a replica (a token chunk is ~200 bytes; a usage chunk ~300). */
const MAX_EVENT_BYTES = 1024 * 1024;

export interface RelayUsage {
  promptTokens: number;
  completionTokens: number;
  cachedTokens: number;
}

export class SseRelay extends EventRelay implements StreamRelay {
  /** vLLM sends a chat or completions stream's first event with its first token. */
  readonly sawFirstToken = true;
  /** Token events relayed so far (content deltas; the chat role chunk is not a token). */
  tokens = 0;
  dataEvents = 0;
  usage: RelayUsage | null = null;
  finishReason: string | null = null;
  private readonly dropUsage: boolean;
  private readonly isChat: boolean;
  private readonly collectText: boolean;
  private readonly textKey: Buffer;
  /** The deltas' content (chat) or the chunks' text (completions), raw; null unless collectText. */
  private readonly textBytes: ReplyTextBuilder | null;
  private readonly span: JsonStringSpan = { start: 0, end: 0 };

  constructor(sink: ClientSink, dropUsage: boolean, isChat: boolean, collectText = false) {
    super(sink, MAX_EVENT_BYTES);
    this.dropUsage = dropUsage;
    this.isChat = isChat;
    this.collectText = collectText;
    this.textKey = isChat ? CHAT_CONTENT : COMPLETION_TEXT;
    this.textBytes = collectText ? new ReplyTextBuilder() : null;
  }

  /** The reply text relayed so far ('' unless collectText; null if a piece's escapes were malformed). */
  replyText(): string | null {
    return this.textBytes === null ? '' : this.textBytes.text();
  }

  protected errorEvent(r: Rejection): string {
    return errorEvent(r);
  }

  /** Classifies one event; returns false when it must not be forwarded as is. */
  protected onEvent(buf: Buffer, s: number, e: number): boolean {
    if (startsWith(buf, s, DONE)) {
      // [DONE] after an upstream error is never relayed; a clean one is.
      this.sawDone = true;
      return this.upstreamError === null;
    }
    if (startsWith(buf, s, ERROR_PREFIX)) {
      this.upstreamError = normaliseStreamError(buf.toString('utf8', s + 6, e));
      return false;
    }
    if (buf[s] !== 0x64 /* d */) return true; // comments and other fields pass through
    this.dataEvents++;
    if (endsWith(buf, e, PLAIN_TOKEN_TAIL)) {
      if (!(this.isChat && this.dataEvents === 1)) this.tokens++;
      if (this.collectText) this.appendPlainText(buf, s, e);
      return true;
    }
    const choicesEmpty = buf.indexOf(EMPTY_CHOICES, s);
    if (choicesEmpty !== -1 && choicesEmpty < e) {
      this.dataEvents--; // the usage chunk is not a token event
      this.readUsage(buf.toString('utf8', s + 6, e));
      return !this.dropUsage;
    }
    if (!(this.isChat && this.dataEvents === 1)) this.tokens++;
    if (this.collectText) this.appendText(buf, s, e);
    const f = buf.indexOf(FINISH, s);
    if (f !== -1 && f < e) {
      const q = buf.indexOf(0x22, f + FINISH.length);
      if (q !== -1 && q < e) this.finishReason = buf.toString('latin1', f + FINISH.length, q);
    }
    return true;
  }

  /**
   * A plain chat token event (it ends with PLAIN_TOKEN_TAIL): vLLM's delta is {"content":"…"}, so the content
   * ends where CONTENT_END begins; scan back from there to the opening quote. Anything else takes appendText.
   */
  private appendPlainText(buf: Buffer, s: number, e: number): void {
    const q = e - PLAIN_TOKEN_TAIL.length - CONTENT_END.length;
    if (endsWith(buf, e - PLAIN_TOKEN_TAIL.length, CONTENT_END)) {
      let o = q - 1;
      while (o > s && (buf[o] !== 0x22 || escapedAt(buf, o, s))) o--;
      const before = buf[o - CONTENT_COLON.length - 1];
      if (startsWith(buf, o - CONTENT_COLON.length, CONTENT_COLON) && (before === 0x7b || before === 0x2c)) {
        this.textBytes!.append(buf, o + 1, q);
        return;
      }
    }
    this.appendText(buf, s, e);
  }

  private appendText(buf: Buffer, s: number, e: number): void {
    if (findJsonString(buf, this.textKey, s, e, this.span)) this.textBytes!.append(buf, this.span.start, this.span.end);
  }

  private readUsage(json: string): void {
    try {
      // Counts that are not numbers leave usage null: billing then uses the relayed token count.
      const n = usageNumbers((JSON.parse(json) as { usage?: unknown }).usage);
      if (n !== null) this.usage = n;
    } catch {
      // A malformed usage chunk is the replica's bug; billing falls back to relayed counts.
    }
  }
}

/** Whether buf[.., end) ends with `needle`. */
function endsWith(buf: Buffer, end: number, needle: Buffer): boolean {
  const at = end - needle.length;
  if (at < 0) return false;
  for (let k = needle.length - 1; k >= 0; k--) if (buf[at + k] !== needle[k]) return false;
  return true;
}


/** vLLM's mid-stream error is {"error":{"message","type":"BadRequestError","code":400}}: numeric code. */
export function normaliseStreamError(json: string): Rejection {
  let message = 'The replica failed while streaming the response.';
  try {
    const parsed = JSON.parse(json) as { error?: { message?: unknown } | string };
    const m = typeof parsed.error === 'object' ? parsed.error?.message : parsed.error;
    if (typeof m === 'string' && m) message = m;
  } catch {
    // keep the generic message
  }
  return { code: 'upstream_error', message };
}
