// A trace collector stand-in for benches: accepts OTLP/HTTP exports (POST /v1/traces, any encoding), counts
// them and their bytes, and answers 200 without decoding. It runs in the bench process, so its CPU is not
// the gateway's: what a gateway with tracing on is charged is its own span work and export, as with a
// collector on another host. Thread: bench main thread.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface OtlpSink {
  /** The traces endpoint (…/v1/traces). */
  readonly endpoint: string;
  readonly posts: number;
  readonly bytes: number;
  close(): Promise<void>;
}

export async function startOtlpSink(): Promise<OtlpSink> {
  let posts = 0;
  let bytes = 0;
  const server = createServer((req, res) => {
    req.on('data', (c: Buffer) => (bytes += c.length));
    req.on('end', () => {
      posts++;
      res.writeHead(200, { 'content-type': String(req.headers['content-type'] ?? 'application/x-protobuf') }).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/traces`,
    get posts() {
      return posts;
    },
    get bytes() {
      return bytes;
    },
    close: () => new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    }),
  };
}
