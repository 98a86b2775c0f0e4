// The one module that imports OpenTelemetry: a tracer provider with a batch span processor and an OTLP/HTTP
// exporter (protobuf or JSON), behind the gateway's Tracer interface (tracer.ts). Each thread that traces (the
// main thread, or each acceptor thread) builds its own with the same resource: spans leave every thread
// through its own exporter, in batches, off the request path (src/tracing/README.md has the costs).
// Everything is configured here from TracingSettings; the SDK's own reading of process.env is overridden
// for the endpoint, the sampler and the batch sizes.
// Thread: any thread that traces. Setup here; root()/child() and the SpanHandle calls per request (on only).
import { ROOT_CONTEXT, SpanStatusCode, trace, type Context, type Span } from '@opentelemetry/api';
import { setGlobalErrorHandler, W3CTraceContextPropagator } from '@opentelemetry/core';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler, AlwaysOnSampler, BasicTracerProvider, BatchSpanProcessor, ParentBasedSampler, TraceIdRatioBasedSampler, type Sampler,
} from '@opentelemetry/sdk-trace-base';
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as ProtoExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { ATTR_SERVICE_NAME } from '@opentelemetry/semantic-conventions';
import type { SamplerName, TracingSettings } from './settings.ts';
import type { AttributeValue, SpanHandle, SpanKindValue, Tracer } from './tracer.ts';

/** How often a failing exporter may write a log line (the collector down must not flood the log). */
const ERROR_LOG_EVERY_MS = 60_000;

class OtelSpan implements SpanHandle {
  readonly span: Span;
  readonly recording: boolean;

  constructor(span: Span) {
    this.span = span;
    this.recording = span.isRecording();
  }

  get traceparent(): string {
    const sc = this.span.spanContext();
    return `00-${sc.traceId}-${sc.spanId}-${(sc.traceFlags & 1) === 1 ? '01' : '00'}`;
  }

  get tracestate(): string {
    return this.span.spanContext().traceState?.serialize() ?? '';
  }

  set(key: string, value: AttributeValue): void {
    this.span.setAttribute(key, value);
  }

  event(name: string, timeMs: number, attributes?: Record<string, AttributeValue>): void {
    this.span.addEvent(name, attributes, timeMs);
  }

  fail(message: string): void {
    this.span.setStatus({ code: SpanStatusCode.ERROR, message });
  }

  rename(name: string): void {
    this.span.updateName(name);
  }

  end(timeMs: number): void {
    this.span.end(timeMs);
  }
}

const propagator = new W3CTraceContextPropagator();
const getter = {
  keys: (c: Record<string, string>) => Object.keys(c),
  get: (c: Record<string, string>, key: string) => c[key],
};

export interface OtelOptions {
  /** Resource attributes every thread shares, under the settings' (the process's instance id). */
  resource: Record<string, string>;
  /** Export failures, at most one line a minute. */
  warn(message: string): void;
}

/** A tracer exporting to settings.endpoint over OTLP/HTTP. */
export function createOtelTracer(settings: TracingSettings, opts: OtelOptions): Tracer {
  const exporterConfig = { url: settings.endpoint, headers: { ...settings.headers } };
  const exporter = settings.protocol === 'http/json' ? new JsonExporter(exporterConfig) : new ProtoExporter(exporterConfig);
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ ...opts.resource, ...settings.resourceAttributes, [ATTR_SERVICE_NAME]: settings.serviceName }),
    sampler: sampler(settings.sampler, settings.samplerArg),
    spanProcessors: [new BatchSpanProcessor(exporter, {
      scheduledDelayMillis: settings.exportDelayMs,
      maxQueueSize: settings.maxQueueSize,
      maxExportBatchSize: settings.maxExportBatchSize,
    })],
  });
  let lastLogged = -Infinity;
  let suppressed = 0;
  setGlobalErrorHandler((err) => {
    const now = performance.now();
    if (now - lastLogged < ERROR_LOG_EVERY_MS) {
      suppressed++;
      return;
    }
    lastLogged = now;
    const more = suppressed > 0 ? ` (${suppressed} more since the last line)` : '';
    suppressed = 0;
    opts.warn(`trace export to ${settings.endpoint} failed: ${err instanceof Error ? err.message : String(err)}${more}`);
  });
  const tracer = provider.getTracer('expediter');
  return {
    root(name: string, kind: SpanKindValue, startMs: number, traceparent: string, tracestate: string): SpanHandle {
      let parent: Context = ROOT_CONTEXT;
      if (traceparent !== '') parent = propagator.extract(ROOT_CONTEXT, tracestate !== '' ? { traceparent, tracestate } : { traceparent }, getter);
      return new OtelSpan(tracer.startSpan(name, { kind, startTime: startMs }, parent));
    },
    child(parent: SpanHandle, name: string, kind: SpanKindValue, startMs: number): SpanHandle {
      return new OtelSpan(tracer.startSpan(name, { kind, startTime: startMs }, trace.setSpan(ROOT_CONTEXT, (parent as OtelSpan).span)));
    },
    flush: () => provider.forceFlush(),
    shutdown: () => provider.shutdown(),
  };
}

function sampler(name: SamplerName, ratio: number): Sampler {
  switch (name) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return new TraceIdRatioBasedSampler(ratio);
    case 'parentbased_always_on':
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratio) });
  }
}
