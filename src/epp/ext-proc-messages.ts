// The ext_proc messages as grpc-transport.ts decodes and encodes them (plain objects named after the proto
// fields, proto/envoy/service/ext_proc/v3/external_processor.proto), and builders for the responses an endpoint
// picker sends. Thread: main. Hot path: echo() per body chunk builds one small object tree (no copy of the bytes).

export interface HeaderValue {
  key: string;
  value?: string;
  raw_value?: Buffer;
}

export interface StructValue {
  kind?: 'nullValue' | 'numberValue' | 'stringValue' | 'boolValue' | 'structValue' | 'listValue';
  stringValue?: string;
  listValue?: { values?: StructValue[] };
  structValue?: PbStruct;
}

export interface PbStruct {
  fields?: Record<string, StructValue>;
}

export interface HttpHeaders {
  headers?: { headers?: HeaderValue[] };
  end_of_stream?: boolean;
}

export interface HttpBody {
  body?: Buffer;
  end_of_stream?: boolean;
}

export interface ProcessingRequest {
  request?: 'request_headers' | 'response_headers' | 'request_body' | 'response_body' | 'request_trailers' | 'response_trailers';
  request_headers?: HttpHeaders;
  response_headers?: HttpHeaders;
  request_body?: HttpBody;
  response_body?: HttpBody;
  request_trailers?: { trailers?: { headers?: HeaderValue[] } };
  response_trailers?: { trailers?: { headers?: HeaderValue[] } };
  metadata_context?: { filter_metadata?: Record<string, PbStruct> };
  observability_mode?: boolean;
}

export interface HeaderValueOption {
  header: { key: string; raw_value: Buffer };
  append_action?: number;
}

export interface CommonResponse {
  status?: number;
  header_mutation?: { set_headers?: HeaderValueOption[]; remove_headers?: string[] };
  body_mutation?: { streamed_response?: { body: Buffer; end_of_stream: boolean } };
  clear_route_cache?: boolean;
}

export interface ImmediateResponse {
  status: { code: number };
  headers?: { set_headers: HeaderValueOption[] };
  body?: Buffer;
  details?: string;
}

export interface ProcessingResponse {
  request_headers?: { response?: CommonResponse };
  response_headers?: { response?: CommonResponse };
  request_body?: { response?: CommonResponse };
  response_body?: { response?: CommonResponse };
  request_trailers?: { header_mutation?: unknown };
  response_trailers?: { header_mutation?: unknown };
  immediate_response?: ImmediateResponse;
  dynamic_metadata?: PbStruct;
}

/** GIE's names (the endpoint picker protocol, gateway-api-inference-extension docs/proposals/004). */
export const DESTINATION_HEADER = 'x-gateway-destination-endpoint';
export const LB_NAMESPACE = 'envoy.lb';
export const SUBSET_NAMESPACE = 'envoy.lb.subset_hint';
export const SUBSET_KEY = 'x-gateway-destination-endpoint-subset';

/** A streamed chunk at most this long: some Envoy builds cap a streamed body message at 64 KiB (GIE's margin). */
export const MAX_STREAMED_CHUNK = 62_000;

/** HeaderValueOption's OVERWRITE_IF_EXISTS_OR_ADD: a client-sent x-gateway-destination-endpoint is replaced, not joined. */
const OVERWRITE = 2;

export function setHeader(key: string, value: string): HeaderValueOption {
  return { header: { key, raw_value: Buffer.from(value, 'latin1') }, append_action: OVERWRITE };
}

/** A header's value: Envoy sends it in raw_value (bytes), older builds in value. */
export function headerValue(h: HeaderValue): string {
  return h.raw_value !== undefined && h.raw_value.length > 0 ? h.raw_value.toString('latin1') : h.value ?? '';
}

/** The pick: destination header (primary first, then fallbacks), Content-Length, route cache cleared, envoy.lb metadata. */
export function pickResponse(endpoints: string, contentLength: number | null, extra: readonly HeaderValueOption[]): ProcessingResponse {
  const set = [setHeader(DESTINATION_HEADER, endpoints), ...extra];
  if (contentLength !== null) set.push(setHeader('content-length', String(contentLength)));
  return {
    request_headers: { response: { header_mutation: { set_headers: set }, clear_route_cache: true } },
    dynamic_metadata: { fields: { [LB_NAMESPACE]: { structValue: { fields: { [DESTINATION_HEADER]: { stringValue: endpoints } } } } } },
  };
}

/** One body chunk passed on unchanged, request or response direction. */
export function echo(direction: 'request_body' | 'response_body', body: Buffer, endOfStream: boolean): ProcessingResponse {
  return { [direction]: { response: { body_mutation: { streamed_response: { body, end_of_stream: endOfStream } } } } };
}

export const RESPONSE_HEADERS_CONTINUE: ProcessingResponse = Object.freeze({ response_headers: {} }) as ProcessingResponse;
export const RESPONSE_TRAILERS_CONTINUE: ProcessingResponse = Object.freeze({ response_trailers: {} }) as ProcessingResponse;
export const REQUEST_TRAILERS_CONTINUE: ProcessingResponse = Object.freeze({ request_trailers: {} }) as ProcessingResponse;

export function immediate(status: number, headers: ReadonlyArray<readonly [string, string]>, body: Buffer | string, details: string): ProcessingResponse {
  return {
    immediate_response: {
      status: { code: status },
      headers: { set_headers: headers.map(([k, v]) => setHeader(k, v)) },
      body: typeof body === 'string' ? Buffer.from(body) : body,
      details,
    },
  };
}

/** The subset hint's endpoints (host:port strings), or null when the request carries none. */
export function subsetHint(m: ProcessingRequest): string[] | null {
  const ns = m.metadata_context?.filter_metadata?.[SUBSET_NAMESPACE];
  const v = ns?.fields?.[SUBSET_KEY];
  if (v === undefined) return null;
  const out: string[] = [];
  if (v.stringValue !== undefined) out.push(...v.stringValue.split(','));
  for (const item of v.listValue?.values ?? []) if (item.stringValue !== undefined) out.push(item.stringValue);
  return out.map((s) => s.trim()).filter((s) => s.length > 0);
}
