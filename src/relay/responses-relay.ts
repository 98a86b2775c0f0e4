// Streams a replica's Responses API events (`event: TYPE\ndata: JSON\n\n`, docs/vllm-facts.md "Responses
// API") to the client as they arrive, with no buffering beyond an event split across two reads, and learns
// on the way: the first response.output_text.delta (TTFT: vLLM sends response.created and
// response.in_progress before prefill, so the first event is not the first token), the deltas relayed (the
// output tokens of a stream that was cut), the response id (response.created), and from the terminal event
// (response.completed, response.incomplete or response.failed) the usage, status and output texts. The
// client's stream ends at the terminal event (Responses streams have no [DONE]). An upstream error event is
// not forwarded: the gateway's own error event ends the stream instead.
// Thread: main. Hot path: per event one native search for its end and a byte compare of its first line (a
// delta, the common case, needs nothing more); created and the terminal event are JSON-parsed (twice per stream).
import type { ClientSink } from './client-sink.ts';
import { responsesErrorEvent } from '../errors/openai-error-body.ts';
import type { Rejection } from '../errors/rejection.ts';
import { normaliseStreamError } from './sse-relay.ts';
import { responseFigures, responsesFinishReason, type ResponseFigures } from './responses-figures.ts';
import type { StreamRelay } from './stream-relay.ts';
import { EventRelay, startsWith } from './event-relay.ts';
import type { UsageNumbers } from './usage-numbers.ts';

const DELTA = Buffer.from('event: response.output_text.delta\n');
const EVENT = Buffer.from('event: ');
const DATA = Buffer.from('data: ');
const TERMINAL = new Set(['response.completed', 'response.incomplete', 'response.failed']);
/** Largest single event accepted: response.completed carries the whole output text. */
const MAX_EVENT_BYTES = 32 * 1024 * 1024;

export class ResponsesRelay extends EventRelay implements StreamRelay {
  tokens = 0;
  usage: UsageNumbers | null = null;
  finishReason: string | null = null;
  sawFirstToken = false;
  /** The response's id, from response.created (or the terminal event). */
  responseId: string | null = null;
  /** The terminal event's figures; null until it arrived. */
  figures: ResponseFigures | null = null;
  private readonly maxTokens: number;

  constructor(sink: ClientSink, maxTokens: number) {
    super(sink, MAX_EVENT_BYTES);
    this.maxTokens = maxTokens;
  }

  replyText(): string | null {
    return this.figures === null ? null : this.figures.outputTexts.join('');
  }

  protected errorEvent(r: Rejection): string {
    return responsesErrorEvent(r);
  }

  /** Learns from one event; false when it must not be forwarded (an upstream error). */
  protected onEvent(buf: Buffer, s: number, e: number): boolean {
    if (startsWith(buf, s, DELTA)) {
      this.tokens++;
      this.sawFirstToken = true;
      return true;
    }
    let name = '';
    let dataAt = s;
    if (startsWith(buf, s, EVENT)) {
      const nl = buf.indexOf(0x0a, s);
      name = buf.toString('latin1', s + EVENT.length, nl).trim();
      dataAt = nl + 1;
    }
    if (!startsWith(buf, dataAt, DATA)) return true; // comments and other fields pass through
    const json = buf.toString('utf8', dataAt + DATA.length, e).trim();
    if (name === 'error' || json.startsWith('{"error"')) {
      this.upstreamError = normaliseStreamError(json.startsWith('{"error"') ? json : JSON.stringify({ error: safeParse(json) }));
      return false;
    }
    if (name === '') name = typeField(safeParse(json));
    if (name === 'response.output_text.delta') {
      this.tokens++;
      this.sawFirstToken = true;
    } else if (name === 'response.created') {
      const id = responseFigures((safeParse(json) as { response?: unknown } | null)?.response).id;
      if (id !== null) this.responseId = id;
    } else if (TERMINAL.has(name)) {
      const f = responseFigures((safeParse(json) as { response?: unknown } | null)?.response);
      this.figures = f;
      this.usage = f.usage;
      this.finishReason = responsesFinishReason(f, this.maxTokens);
      if (f.id !== null) this.responseId = f.id;
      this.sawDone = true;
    }
    return true;
  }
}

function safeParse(json: string): unknown {
  try {
    return JSON.parse(json) as unknown;
  } catch {
    return null;
  }
}

function typeField(v: unknown): string {
  const t = v !== null && typeof v === 'object' ? (v as { type?: unknown }).type : undefined;
  return typeof t === 'string' ? t : '';
}

