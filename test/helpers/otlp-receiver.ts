// An OTLP/HTTP trace receiver for tests: a node:http server on a free loopback port that takes POST /v1/traces
// in both encodings (application/json and application/x-protobuf) and keeps every span it decoded, flattened
// with its resource's attributes. The protobuf decoder is written here from the OTLP .proto field numbers
// (opentelemetry-proto trace/v1, common/v1), independently of the SDK's encoder, so a test checks the wire.
// Thread: main (test process).
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';

export type Value = string | number | boolean | Value[] | null;

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  /** '' for a root. */
  parentSpanId: string;
  traceState: string;
  name: string;
  /** OTLP SpanKind: 1 internal, 2 server, 3 client. */
  kind: number;
  startNs: bigint;
  endNs: bigint;
  attributes: Record<string, Value>;
  events: Array<{ name: string; attributes: Record<string, Value> }>;
  /** OTLP StatusCode: 0 unset, 1 ok, 2 error. */
  status: { code: number; message: string };
  resource: Record<string, Value>;
  /** The request's content type: which encoding carried it. */
  encoding: 'json' | 'protobuf';
}

export interface OtlpReceiver {
  readonly url: string;
  readonly spans: ReceivedSpan[];
  /** POST bodies received, any path. */
  readonly posts: number;
  close(): Promise<void>;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  let posts = 0;
  const server = createServer((req, res) => {
    void (async () => {
      const body = await readAll(req);
      posts++;
      const type = String(req.headers['content-type'] ?? '');
      if (req.method !== 'POST' || req.url !== '/v1/traces') return void res.writeHead(404).end();
      try {
        if (type.startsWith('application/json')) {
          spans.push(...fromJson(JSON.parse(body.toString('utf8')) as JsonRequest));
          res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
        } else if (type.startsWith('application/x-protobuf')) {
          spans.push(...fromProtobuf(body));
          res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
        } else {
          res.writeHead(415).end();
        }
      } catch (err) {
        res.writeHead(400).end(String(err));
      }
    })();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans,
    get posts() {
      return posts;
    },
    close: () => new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    }),
  };
}

function readAll(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

// ---- OTLP/JSON ----

interface JsonValue { stringValue?: string; boolValue?: boolean; intValue?: string | number; doubleValue?: number; arrayValue?: { values?: JsonValue[] } }
interface JsonKv { key: string; value: JsonValue }
interface JsonSpan {
  traceId: string; spanId: string; parentSpanId?: string; traceState?: string; name: string; kind: number;
  startTimeUnixNano: string | number; endTimeUnixNano: string | number; attributes?: JsonKv[];
  events?: Array<{ name: string; attributes?: JsonKv[] }>; status?: { code?: number; message?: string };
}
interface JsonRequest { resourceSpans?: Array<{ resource?: { attributes?: JsonKv[] }; scopeSpans?: Array<{ spans?: JsonSpan[] }> }> }

function jsonValue(v: JsonValue): Value {
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.arrayValue !== undefined) return (v.arrayValue.values ?? []).map(jsonValue);
  return null;
}

function jsonAttrs(kvs: JsonKv[] | undefined): Record<string, Value> {
  const out: Record<string, Value> = {};
  for (const kv of kvs ?? []) out[kv.key] = jsonValue(kv.value);
  return out;
}

function fromJson(req: JsonRequest): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  for (const rs of req.resourceSpans ?? []) {
    const resource = jsonAttrs(rs.resource?.attributes);
    for (const ss of rs.scopeSpans ?? []) {
      for (const s of ss.spans ?? []) {
        out.push({
          traceId: s.traceId, spanId: s.spanId, parentSpanId: s.parentSpanId ?? '', traceState: s.traceState ?? '', name: s.name, kind: s.kind,
          startNs: BigInt(s.startTimeUnixNano), endNs: BigInt(s.endTimeUnixNano), attributes: jsonAttrs(s.attributes),
          events: (s.events ?? []).map((e) => ({ name: e.name, attributes: jsonAttrs(e.attributes) })),
          status: { code: s.status?.code ?? 0, message: s.status?.message ?? '' }, resource, encoding: 'json',
        });
      }
    }
  }
  return out;
}

// ---- OTLP/protobuf: the wire format, by field number ----

interface Field { no: number; wire: number; varint: bigint; bytes: Buffer }

/** Every field of one message, in order. */
function fields(buf: Buffer): Field[] {
  const out: Field[] = [];
  let i = 0;
  const varint = (): bigint => {
    let v = 0n;
    let shift = 0n;
    for (;;) {
      const b = buf[i++];
      if (b === undefined) throw new Error('truncated varint');
      v |= BigInt(b & 0x7f) << shift;
      if ((b & 0x80) === 0) return v;
      shift += 7n;
    }
  };
  while (i < buf.length) {
    const key = Number(varint());
    const no = key >>> 3;
    const wire = key & 7;
    if (wire === 0) out.push({ no, wire, varint: varint(), bytes: Buffer.alloc(0) });
    else if (wire === 1) {
      out.push({ no, wire, varint: buf.readBigUInt64LE(i), bytes: buf.subarray(i, i + 8) });
      i += 8;
    } else if (wire === 2) {
      const len = Number(varint());
      out.push({ no, wire, varint: 0n, bytes: buf.subarray(i, i + len) });
      i += len;
    } else if (wire === 5) {
      out.push({ no, wire, varint: BigInt(buf.readUInt32LE(i)), bytes: buf.subarray(i, i + 4) });
      i += 4;
    } else throw new Error(`unsupported wire type ${wire}`);
  }
  return out;
}

function anyValue(buf: Buffer): Value {
  for (const f of fields(buf)) {
    switch (f.no) {
      case 1: return f.bytes.toString('utf8');
      case 2: return f.varint !== 0n;
      case 3: return Number(BigInt.asIntN(64, f.varint));
      case 4: return f.bytes.readDoubleLE(0);
      case 5: return fields(f.bytes).filter((v) => v.no === 1).map((v) => anyValue(v.bytes));
    }
  }
  return null;
}

function kvs(list: Field[]): Record<string, Value> {
  const out: Record<string, Value> = {};
  for (const f of list) {
    let key = '';
    let value: Value = null;
    for (const g of fields(f.bytes)) {
      if (g.no === 1) key = g.bytes.toString('utf8');
      else if (g.no === 2) value = anyValue(g.bytes);
    }
    out[key] = value;
  }
  return out;
}

function fromProtobuf(body: Buffer): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  for (const rs of fields(body).filter((f) => f.no === 1)) {
    const rsFields = fields(rs.bytes);
    const res = rsFields.find((f) => f.no === 1);
    const resource = res ? kvs(fields(res.bytes).filter((f) => f.no === 1)) : {};
    for (const ss of rsFields.filter((f) => f.no === 2)) {
      for (const sp of fields(ss.bytes).filter((f) => f.no === 2)) {
        const s = fields(sp.bytes);
        const one = (no: number): Field | undefined => s.find((f) => f.no === no);
        const status = one(15) ? fields(one(15)!.bytes) : [];
        out.push({
          traceId: one(1)?.bytes.toString('hex') ?? '', spanId: one(2)?.bytes.toString('hex') ?? '',
          parentSpanId: one(4)?.bytes.toString('hex') ?? '', traceState: one(3)?.bytes.toString('utf8') ?? '',
          name: one(5)?.bytes.toString('utf8') ?? '', kind: Number(one(6)?.varint ?? 0n),
          startNs: one(7)?.varint ?? 0n, endNs: one(8)?.varint ?? 0n,
          attributes: kvs(s.filter((f) => f.no === 9)),
          events: s.filter((f) => f.no === 11).map((e) => {
            const ef = fields(e.bytes);
            return { name: ef.find((f) => f.no === 2)?.bytes.toString('utf8') ?? '', attributes: kvs(ef.filter((f) => f.no === 3)) };
          }),
          status: { code: Number(status.find((f) => f.no === 3)?.varint ?? 0n), message: status.find((f) => f.no === 2)?.bytes.toString('utf8') ?? '' },
          resource, encoding: 'protobuf',
        });
      }
    }
  }
  return out;
}
