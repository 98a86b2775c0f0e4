// The gRPC side of the endpoint picker: loads the checked-in protos (proto/: Envoy's ext_proc with Envoy's field
// numbers, and grpc.health.v1), serves both services on one port, and builds clients for the tests and the
// bench that play Envoy. The only module that imports @grpc/grpc-js and @grpc/proto-loader.
// Thread: main. Setup here; per message, grpc-js decodes into plain objects (proto-loader's options below).
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { fileURLToPath } from 'node:url';
import type { ProcessingRequest, ProcessingResponse } from './ext-proc-messages.ts';

const PROTO_DIR = fileURLToPath(new URL('./proto/', import.meta.url));

/**
 * Decoded as plain objects: `bytes` as Buffers (the body chunks are echoed without a copy), enums as numbers,
 * `oneofs: true` so a message says which of its oneof fields is set (`request: 'request_body'`). Fields absent
 * on the wire stay absent (no defaults): a decode allocates only what Envoy sent.
 */
const LOAD_OPTIONS: protoLoader.Options = { keepCase: true, longs: Number, enums: Number, bytes: Buffer, defaults: false, oneofs: true, includeDirs: [PROTO_DIR] };

interface Loaded {
  extProc: grpc.ServiceClientConstructor;
  health: grpc.ServiceClientConstructor;
}

let loaded: Loaded | null = null;

function load(): Loaded {
  if (loaded !== null) return loaded;
  const def = protoLoader.loadSync(['envoy/service/ext_proc/v3/external_processor.proto', 'grpc/health/v1/health.proto'], LOAD_OPTIONS);
  const pkg = grpc.loadPackageDefinition(def) as unknown as {
    envoy: { service: { ext_proc: { v3: { ExternalProcessor: grpc.ServiceClientConstructor } } } };
    grpc: { health: { v1: { Health: grpc.ServiceClientConstructor } } };
  };
  loaded = { extProc: pkg.envoy.service.ext_proc.v3.ExternalProcessor, health: pkg.grpc.health.v1.Health };
  return loaded;
}

/** One ext_proc stream as the picker sees it (grpc-js's ServerDuplexStream, narrowed to what is used). */
export interface ProcessStream {
  on(event: 'data', cb: (m: ProcessingRequest) => void): this;
  on(event: 'end' | 'close' | 'cancelled' | 'drain', cb: () => void): this;
  on(event: 'error', cb: (err: Error) => void): this;
  /** False when grpc-js buffers past its high-water mark: wait for 'drain'. */
  write(m: ProcessingResponse): boolean;
  end(): void;
  pause(): void;
  resume(): void;
  /** Closes the stream with a gRPC status (a protocol error). */
  emit(event: 'error', err: { code: number; details: string }): boolean;
  readonly cancelled: boolean;
}

export const GRPC_STATUS = grpc.status;

export const SERVING = 1;
export const NOT_SERVING = 2;
export const SERVICE_UNKNOWN = 3;

export interface EppHandlers {
  process(stream: ProcessStream): void;
  /** grpc.health.v1 status for a service name: SERVING, NOT_SERVING, or SERVICE_UNKNOWN. */
  health(service: string): number;
}

export interface GrpcListener {
  readonly port: number;
  /** Stops accepting; open streams get `graceMs` to finish, then are cancelled. */
  close(graceMs: number): Promise<void>;
}

/** How often a Watch stream re-reads the status (Kubernetes probes use Check; Watch is for clients that hold on). */
const WATCH_POLL_MS = 1000;

export async function listenGrpc(host: string, port: number, h: EppHandlers): Promise<GrpcListener> {
  const { extProc, health } = load();
  const server = new grpc.Server();
  server.addService(extProc.service, {
    Process: (call: grpc.ServerDuplexStream<ProcessingRequest, ProcessingResponse>) => h.process(call as unknown as ProcessStream),
  });
  server.addService(health.service, {
    Check: (call: grpc.ServerUnaryCall<{ service?: string }, unknown>, cb: grpc.sendUnaryData<unknown>) => {
      const status = h.health(call.request.service ?? '');
      if (status === SERVICE_UNKNOWN) cb({ code: grpc.status.NOT_FOUND, details: 'unknown service' });
      else cb(null, { status });
    },
    Watch: (call: grpc.ServerWritableStream<{ service?: string }, unknown>) => {
      const service = call.request.service ?? '';
      let last = -1;
      const tick = (): void => {
        const status = h.health(service);
        if (status !== last) call.write({ status: (last = status) });
      };
      tick();
      const timer = setInterval(tick, WATCH_POLL_MS);
      call.on('cancelled', () => clearInterval(timer));
      call.on('close', () => clearInterval(timer));
    },
  });
  const bound = await new Promise<number>((resolve, reject) => {
    server.bindAsync(`${host.includes(':') ? `[${host}]` : host}:${port}`, grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p)));
  });
  return {
    port: bound,
    close: (graceMs) => new Promise<void>((resolve) => {
      const force = setTimeout(() => server.forceShutdown(), graceMs);
      server.tryShutdown(() => {
        clearTimeout(force);
        resolve();
      });
    }),
  };
}

/** Envoy's side of one stream, for tests and the bench. */
export interface EnvoyStream {
  write(m: ProcessingRequest): boolean;
  end(): void;
  cancel(): void;
  on(event: 'data', cb: (m: ProcessingResponse) => void): this;
  on(event: 'end' | 'close', cb: () => void): this;
  on(event: 'error', cb: (err: Error & { code?: number; details?: string }) => void): this;
  on(event: 'status', cb: (s: { code: number; details: string }) => void): this;
}

export interface EnvoyClient {
  process(): EnvoyStream;
  check(service: string): Promise<number>;
  close(): void;
}

/** A client of both services at `address` (host:port), speaking Envoy's wire format. */
export function envoyClient(address: string): EnvoyClient {
  const { extProc, health } = load();
  const ep = new extProc(address, grpc.credentials.createInsecure()) as unknown as grpc.Client & { Process(): EnvoyStream };
  const hc = new health(address, grpc.credentials.createInsecure()) as unknown as grpc.Client & {
    Check(req: { service: string }, cb: (err: grpc.ServiceError | null, res?: { status?: number }) => void): void;
  };
  return {
    process: () => ep.Process(),
    check: (service) => new Promise<number>((resolve, reject) => hc.Check({ service }, (err, res) => (err ? reject(err) : resolve(res?.status ?? 0)))),
    close: () => {
      ep.close();
      hc.close();
    },
  };
}
