// What the trace exporter is told: the standard OpenTelemetry environment (OTEL_EXPORTER_OTLP_*, OTEL_SERVICE_NAME,
// OTEL_TRACES_SAMPLER/_ARG, OTEL_RESOURCE_ATTRIBUTES, OTEL_BSP_*), with the config file's `tracing` section
// overriding it field by field. Pure: the caller passes the environment (src/config reads process.env).
// Tracing is off unless the section says `enabled: true` or names `traces_endpoint`, or (the section silent) the
// environment sets an OTLP endpoint with OTEL_TRACES_EXPORTER unset or `otlp` and OTEL_SDK_DISABLED not true.
// Settings are checked only when tracing is on: a stray OTEL_ variable cannot stop a gateway that does not trace.
// Thread: any, setup only.
import type { GatewayConfig } from '../config/schema.ts';

export type TracingSection = GatewayConfig['tracing'];
export type Env = Readonly<Record<string, string | undefined>>;

export const SAMPLERS = ['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio'] as const;
export type SamplerName = (typeof SAMPLERS)[number];
export const PROTOCOLS = ['http/protobuf', 'http/json'] as const;
export type Protocol = (typeof PROTOCOLS)[number];

export interface TracingSettings {
  /** The OTLP/HTTP traces URL, used as is (…/v1/traces). */
  readonly endpoint: string;
  readonly protocol: Protocol;
  readonly serviceName: string;
  readonly sampler: SamplerName;
  /** The ratio of the *traceidratio samplers, 0..1. */
  readonly samplerArg: number;
  /** Resource attributes besides service.name (OTEL_RESOURCE_ATTRIBUTES, then the section's). */
  readonly resourceAttributes: Readonly<Record<string, string>>;
  /** Extra request headers to the collector (OTEL_EXPORTER_OTLP_TRACES_HEADERS / _HEADERS), e.g. an API key. */
  readonly headers: Readonly<Record<string, string>>;
  /** Batch span processor: export every this many ms, queue at most this many spans (the rest are dropped). */
  readonly exportDelayMs: number;
  readonly maxQueueSize: number;
  readonly maxExportBatchSize: number;
}

export class TracingSettingsError extends Error {
  override name = 'TracingSettingsError';
}

const DEFAULT_ENDPOINT = 'http://localhost:4318/v1/traces';

/** The settings when tracing is on, else null. Throws TracingSettingsError naming the variable or field at fault. */
export function tracingSettings(section: TracingSection, env: Env): TracingSettings | null {
  const s = section ?? {};
  const tracesEndpoint = nonEmpty(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
  const baseEndpoint = nonEmpty(env.OTEL_EXPORTER_OTLP_ENDPOINT);
  if (s.enabled === false) return null;
  if (s.enabled === undefined && s.traces_endpoint === undefined) {
    if (tracesEndpoint === undefined && baseEndpoint === undefined) return null;
    if (nonEmpty(env.OTEL_SDK_DISABLED)?.toLowerCase() === 'true') return null;
    const exporter = nonEmpty(env.OTEL_TRACES_EXPORTER)?.toLowerCase();
    if (exporter === 'none') return null;
    if (exporter !== undefined && exporter !== 'otlp') throw new TracingSettingsError(`OTEL_TRACES_EXPORTER=${exporter}: only otlp (or none) is supported`);
  }
  const endpoint = s.traces_endpoint
    ?? (tracesEndpoint !== undefined ? checkUrl(tracesEndpoint, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT')
      : baseEndpoint !== undefined ? signalUrl(checkUrl(baseEndpoint, 'OTEL_EXPORTER_OTLP_ENDPOINT')) : DEFAULT_ENDPOINT);
  const protocolVar = env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL !== undefined ? 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL' : 'OTEL_EXPORTER_OTLP_PROTOCOL';
  const protocol = s.protocol ?? oneOf(nonEmpty(env[protocolVar]) ?? 'http/protobuf', PROTOCOLS, protocolVar,
    ' (grpc is not built in: point it at the collector\'s OTLP/HTTP port, 4318)');
  const sampler = s.sampler ?? oneOf(nonEmpty(env.OTEL_TRACES_SAMPLER)?.toLowerCase() ?? 'parentbased_always_on', SAMPLERS, 'OTEL_TRACES_SAMPLER');
  const samplerArg = s.sampler_arg ?? ratio(env.OTEL_TRACES_SAMPLER_ARG, sampler);
  const resource = { ...keyValues(env.OTEL_RESOURCE_ATTRIBUTES, 'OTEL_RESOURCE_ATTRIBUTES'), ...s.resource_attributes };
  const serviceName = s.service_name ?? nonEmpty(env.OTEL_SERVICE_NAME) ?? resource['service.name'] ?? 'expediter';
  delete resource['service.name'];
  const headersVar = env.OTEL_EXPORTER_OTLP_TRACES_HEADERS !== undefined ? 'OTEL_EXPORTER_OTLP_TRACES_HEADERS' : 'OTEL_EXPORTER_OTLP_HEADERS';
  const maxQueueSize = count(env.OTEL_BSP_MAX_QUEUE_SIZE, 'OTEL_BSP_MAX_QUEUE_SIZE', 2048);
  return {
    endpoint, protocol, serviceName, sampler, samplerArg, resourceAttributes: resource,
    headers: keyValues(env[headersVar], headersVar),
    exportDelayMs: count(env.OTEL_BSP_SCHEDULE_DELAY, 'OTEL_BSP_SCHEDULE_DELAY', 5000),
    maxQueueSize,
    maxExportBatchSize: Math.min(maxQueueSize, count(env.OTEL_BSP_MAX_EXPORT_BATCH_SIZE, 'OTEL_BSP_MAX_EXPORT_BATCH_SIZE', 512)),
  };
}

function nonEmpty(v: string | undefined): string | undefined {
  const t = v?.trim();
  return t === undefined || t === '' ? undefined : t;
}

function checkUrl(v: string, name: string): string {
  let u: URL;
  try {
    u = new URL(v);
  } catch {
    throw new TracingSettingsError(`${name}=${v}: not a URL`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new TracingSettingsError(`${name}=${v}: must be an http:// or https:// URL (OTLP/HTTP)`);
  return v;
}

/** The base endpoint's traces URL: `v1/traces` under its path (the OTLP exporter specification's rule). */
function signalUrl(base: string): string {
  return base.endsWith('/') ? `${base}v1/traces` : `${base}/v1/traces`;
}

function oneOf<T extends string>(v: string, allowed: readonly T[], name: string, hint = ''): T {
  if ((allowed as readonly string[]).includes(v)) return v as T;
  throw new TracingSettingsError(`${name}=${v}: must be one of ${allowed.join(', ')}${hint}`);
}

/** OTEL_TRACES_SAMPLER_ARG: read only by the ratio samplers (the others ignore it, as the specification says). */
function ratio(v: string | undefined, sampler: SamplerName): number {
  const t = nonEmpty(v);
  if (t === undefined || !sampler.endsWith('traceidratio')) return 1;
  const x = Number(t);
  if (!Number.isFinite(x) || x < 0 || x > 1) throw new TracingSettingsError(`OTEL_TRACES_SAMPLER_ARG=${t}: must be a ratio from 0 to 1`);
  return x;
}

function count(v: string | undefined, name: string, dflt: number): number {
  const t = nonEmpty(v);
  if (t === undefined) return dflt;
  const x = Number(t);
  if (!Number.isInteger(x) || x < 1) throw new TracingSettingsError(`${name}=${t}: must be a positive whole number`);
  return x;
}

/** `k1=v1,k2=v2`, values percent-decoded (W3C Baggage form, as OTEL_RESOURCE_ATTRIBUTES and the headers use). */
function keyValues(v: string | undefined, name: string): Record<string, string> {
  const out: Record<string, string> = {};
  const t = nonEmpty(v);
  if (t === undefined) return out;
  for (const part of t.split(',')) {
    if (part.trim() === '') continue;
    const eq = part.indexOf('=');
    const key = eq > 0 ? part.slice(0, eq).trim() : '';
    if (key === '') throw new TracingSettingsError(`${name}: "${part.trim()}" is not key=value`);
    try {
      out[key] = decodeURIComponent(part.slice(eq + 1).trim());
    } catch {
      throw new TracingSettingsError(`${name}: the value of ${key} is not valid percent-encoding`);
    }
  }
  return out;
}
