// A loopback HTTP proxy in front of one replica that counts the requests it forwards, by method, path and
// X-Request-Id: it tells how many times the gateway sent a request to that replica, including requests the
// replica refused before they reached its engine (which the engine's state never shows). It also keeps the
// headers of every POST it forwarded (what the gateway sent the replica: x-request-id, traceparent).
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface CountingProxy {
  readonly url: string;
  /** How many `POST path` requests with this X-Request-Id were forwarded. */
  count(path: string, requestId: string): number;
  /** The POST requests forwarded so far, in order, with their headers as received. */
  readonly posts: ReadonlyArray<{ path: string; headers: Record<string, string | string[] | undefined> }>;
  close(): Promise<void>;
}

export async function startCountingProxy(target: string): Promise<CountingProxy> {
  const counts = new Map<string, number>();
  const posts: Array<{ path: string; headers: Record<string, string | string[] | undefined> }> = [];
  const t = new URL(target);
  const server: Server = createServer((req, res) => {
    const key = `${req.method ?? ''} ${req.url ?? ''} ${String(req.headers['x-request-id'] ?? '')}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
    if (req.method === 'POST') posts.push({ path: req.url ?? '', headers: { ...req.headers } });
    const up = request({ host: t.hostname, port: t.port, method: req.method, path: req.url, headers: req.headers }, (upRes) => {
      res.writeHead(upRes.statusCode ?? 502, upRes.headers);
      upRes.pipe(res);
    });
    up.on('error', () => res.destroy());
    res.on('close', () => up.destroy());
    req.pipe(up);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    count: (path, requestId) => counts.get(`POST ${path} ${requestId}`) ?? 0,
    posts,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}
