// Tracing for one thread's request path, decided at setup: startTracing() returns null when tracing is off, and
// the pipeline then builds nothing per request (ctx.trace stays null). When on, each thread that runs the request
// path (the main thread, or every acceptor thread) has its own tracer and exporter with the same resource
// (service.name, service.instance.id = host:pid, the OTEL_RESOURCE_ATTRIBUTES), so a collector sees one
// service instance whichever thread served the request; the root span's thread.id says which.
// Thread: any thread that runs the request path. Setup and shutdown; begin() per request when on.
import { hostname } from 'node:os';
import { threadId } from 'node:worker_threads';
import type { GatewayConfig } from '../config/schema.ts';
import { createOtelTracer } from './otel.ts';
import { RequestTrace, type RequestFigures } from './request-trace.ts';
import { tracingSettings, type Env } from './settings.ts';
import type { Tracer } from './tracer.ts';

export class RequestTracing {
  readonly tracer: Tracer;
  readonly threadId = threadId;

  constructor(tracer: Tracer) {
    this.tracer = tracer;
  }

  /** The request's trace, from the client's `traceparent` / `tracestate` ('' when absent). */
  begin(route: RequestFigures['route'], policy: string, startedAt: number, traceparent: string, tracestate: string): RequestTrace {
    return new RequestTrace(this, route, policy, startedAt, traceparent, tracestate);
  }

  /** Exports the spans queued so far (tests, and before an acceptor thread ends). */
  flush(): Promise<void> {
    return this.tracer.flush();
  }

  shutdown(): Promise<void> {
    return this.tracer.shutdown();
  }
}

/** This thread's tracing, or null when the config and environment leave it off (settings.ts). */
export function startTracing(cfg: GatewayConfig, env: Env, warn: (message: string) => void): RequestTracing | null {
  const settings = tracingSettings(cfg.tracing, env);
  if (settings === null) return null;
  return new RequestTracing(createOtelTracer(settings, { resource: { 'service.instance.id': `${hostname()}:${process.pid}` }, warn }));
}
