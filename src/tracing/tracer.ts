// The gateway's own view of a tracer: the few calls the request path makes, so that nothing outside otel.ts
// imports the OpenTelemetry SDK (one module per dependency). Times are performance.now() milliseconds of the
// calling thread (the SDK anchors them to the thread's time origin). Types only.

export type AttributeValue = string | number | boolean | string[];

/** OpenTelemetry's SpanKind values, as plain numbers. */
export const SpanKind = { internal: 0, server: 1, client: 2 } as const;
export type SpanKindValue = (typeof SpanKind)[keyof typeof SpanKind];

export interface SpanHandle {
  /** The W3C `traceparent` header naming this span as the parent (flags say whether it is sampled). */
  readonly traceparent: string;
  /** The trace's `tracestate`, '' when there is none. */
  readonly tracestate: string;
  /** False when the sampler dropped the trace: setting attributes is then pointless (and skipped). */
  readonly recording: boolean;
  set(key: string, value: AttributeValue): void;
  event(name: string, timeMs: number, attributes?: Record<string, AttributeValue>): void;
  /** Status ERROR with this description. */
  fail(message: string): void;
  rename(name: string): void;
  end(timeMs: number): void;
}

export interface Tracer {
  /** A span whose parent is the client's `traceparent` (and `tracestate`) when valid; a new trace otherwise. */
  root(name: string, kind: SpanKindValue, startMs: number, traceparent: string, tracestate: string): SpanHandle;
  child(parent: SpanHandle, name: string, kind: SpanKindValue, startMs: number): SpanHandle;
  /** Exports what is queued now. */
  flush(): Promise<void>;
  /** Exports what is queued and stops. */
  shutdown(): Promise<void>;
}
