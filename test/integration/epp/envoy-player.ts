// Plays Envoy's ext_proc filter against the endpoint picker, over real gRPC on loopback with Envoy's field
// numbers (the picker's checked-in protos): request headers, the body in FULL_DUPLEX_STREAMED chunks, then,
// for a picked request, the response phase: it sends the echoed request body to the picked replica over HTTP
// (as Envoy's router would) and streams the replica's response headers and body chunks into the stream as
// they arrive. Emulated, not Envoy: no Envoy build runs on these machines.
// Thread: main (test process).
import { once, type EventEmitter } from 'node:events';
import * as http from 'node:http';
import { envoyClient, type EnvoyClient, type EnvoyStream } from '../../../src/epp/grpc-transport.ts';
import type { ProcessingRequest, ProcessingResponse } from '../../../src/epp/ext-proc-messages.ts';

export interface PlayRequest {
  path?: string;
  method?: string;
  headers?: Record<string, string>;
  /** The body as Envoy would chunk it; absent: a headers-only request. */
  chunks?: Buffer[];
  /** Subset hint endpoints (host:port). */
  subset?: string[];
}

export interface Pick {
  /** The x-gateway-destination-endpoint header value. */
  endpoints: string;
  /** The same, from dynamic metadata envoy.lb. */
  metadataEndpoints: string | undefined;
  clearRouteCache: boolean;
  contentLength: string | undefined;
  setHeaders: Map<string, string>;
  /** The request body as echoed (streamed_response chunks, in order). */
  echoed: Buffer[];
  echoEnd: boolean;
}

export interface Immediate {
  status: number;
  headers: Map<string, string>;
  body: string;
}

export class EnvoyPlayer {
  readonly client: EnvoyClient;
  constructor(port: number) {
    this.client = envoyClient(`127.0.0.1:${port}`);
  }

  close(): void {
    this.client.close();
  }

  /** Opens a stream and sends the request phase; resolves with the stream and its replies so far. */
  open(req: PlayRequest): { stream: EnvoyStream; replies: ProcessingResponse[]; ended: Promise<{ code: number; details: string }> } {
    const stream = this.client.process();
    const replies: ProcessingResponse[] = [];
    stream.on('data', (m) => replies.push(m));
    const ended = new Promise<{ code: number; details: string }>((resolve) => {
      stream.on('status', (s) => resolve(s));
      stream.on('error', () => undefined);
    });
    const headers = Object.entries({ ':method': req.method ?? 'POST', ':path': req.path ?? '/v1/chat/completions', 'content-type': 'application/json', ...req.headers })
      .map(([key, v]) => ({ key, raw_value: Buffer.from(v) }));
    const first: ProcessingRequest = { request_headers: { headers: { headers }, end_of_stream: req.chunks === undefined } } as ProcessingRequest;
    if (req.subset !== undefined) {
      first.metadata_context = { filter_metadata: { 'envoy.lb.subset_hint': { fields: { 'x-gateway-destination-endpoint-subset': { listValue: { values: req.subset.map((s) => ({ stringValue: s })) } } } } } };
    }
    stream.write(first);
    const chunks = req.chunks ?? [];
    chunks.forEach((c, i) => stream.write({ request_body: { body: c, end_of_stream: i === chunks.length - 1 } } as ProcessingRequest));
    return { stream, replies, ended };
  }

  /** Waits until the replies hold the pick (with the whole body echoed) or an immediate response. */
  async decision(replies: ProcessingResponse[], stream: EnvoyStream, withBody: boolean): Promise<Pick | Immediate> {
    for (;;) {
      const imm = replies.find((r) => r.immediate_response !== undefined)?.immediate_response;
      if (imm !== undefined) {
        return { status: imm.status.code, headers: headerMap(imm.headers?.set_headers ?? []), body: (imm.body ?? Buffer.alloc(0)).toString() };
      }
      const pick = replies.find((r) => r.request_headers !== undefined);
      const echoes = replies.filter((r) => r.request_body !== undefined).map((r) => r.request_body!.response!.body_mutation!.streamed_response!);
      if (pick !== undefined && (!withBody || echoes.some((e) => e.end_of_stream))) {
        const common = pick.request_headers!.response!;
        const set = headerMap(common.header_mutation?.set_headers ?? []);
        const lb = pick.dynamic_metadata?.fields?.['envoy.lb']?.structValue?.fields?.['x-gateway-destination-endpoint']?.stringValue;
        return {
          endpoints: set.get('x-gateway-destination-endpoint') ?? '', metadataEndpoints: lb, clearRouteCache: common.clear_route_cache === true,
          contentLength: set.get('content-length'), setHeaders: set, echoed: echoes.map((e) => Buffer.from(e.body ?? Buffer.alloc(0))), echoEnd: echoes.at(-1)?.end_of_stream === true,
        };
      }
      await once(stream as unknown as EventEmitter, 'data');
    }
  }

  /**
   * Envoy's router: sends the echoed body to the primary endpoint, then streams the response phase into the
   * picker as the replica produces it. Resolves with the response body Envoy would pass to the client (the
   * picker's echoes, joined) once the picker echoed the last chunk.
   */
  async forward(stream: EnvoyStream, replies: ProcessingResponse[], pick: Pick, path: string): Promise<{ status: number; body: Buffer; sent: Buffer; chunks: number }> {
    const [host, port] = pick.endpoints.split(',')[0]!.split(':');
    const body = Buffer.concat(pick.echoed);
    const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
      const r = http.request({ host, port: Number(port), path, method: 'POST', headers: { 'content-type': 'application/json', 'content-length': body.length } }, resolve);
      r.on('error', reject);
      r.end(body);
    });
    const headers = [{ key: ':status', raw_value: Buffer.from(String(res.statusCode)) }, ...Object.entries(res.headers).map(([k, v]) => ({ key: k, raw_value: Buffer.from(String(v)) }))];
    stream.write({ response_headers: { headers: { headers } } } as ProcessingRequest);
    let chunks = 0;
    const sent: Buffer[] = [];
    for await (const c of res) {
      chunks++;
      sent.push(c as Buffer);
      stream.write({ response_body: { body: c as Buffer, end_of_stream: false } } as ProcessingRequest);
    }
    stream.write({ response_body: { body: Buffer.alloc(0), end_of_stream: true } } as ProcessingRequest);
    for (;;) {
      const echoes = replies.filter((r) => r.response_body !== undefined).map((r) => r.response_body!.response!.body_mutation!.streamed_response!);
      if (echoes.some((e) => e.end_of_stream)) return { status: res.statusCode ?? 0, body: Buffer.concat(echoes.map((e) => e.body ?? Buffer.alloc(0))), sent: Buffer.concat(sent), chunks };
      await once(stream as unknown as EventEmitter, 'data');
    }
  }
}

function headerMap(set: Array<{ header: { key: string; raw_value?: Buffer; value?: string } }>): Map<string, string> {
  return new Map(set.map((h) => [h.header.key.toLowerCase(), h.header.raw_value !== undefined ? Buffer.from(h.header.raw_value).toString() : h.header.value ?? '']));
}

export function isPick(d: Pick | Immediate): d is Pick {
  return 'endpoints' in d;
}
