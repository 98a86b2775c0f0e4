// Two consecutive free loopback TCP ports (a KV-event publisher binds P, its replay socket P + 1), found by
// binding both and letting them go: vLLM's replay endpoint sits at a fixed offset, so port 0 cannot be used.
// Thread: test main. A small race (another process taking a port between the check and the bind) is retried
// by callers that bind at once.
import { createServer, type Server } from 'node:net';

function listen(port: number): Promise<Server | null> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(null));
    s.listen(port, '127.0.0.1', () => resolve(s));
  });
}

const close = (s: Server): Promise<void> => new Promise((r) => s.close(() => r()));

/** P such that 127.0.0.1:P and :P+1 were both free a moment ago. */
export async function freePortPair(): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const a = await listen(0);
    if (a === null) continue;
    const port = (a.address() as { port: number }).port;
    const b = port < 65535 ? await listen(port + 1) : null;
    await close(a);
    if (b !== null) {
      await close(b);
      return port;
    }
  }
  throw new Error('no two consecutive free ports on 127.0.0.1');
}

/** tcp://127.0.0.1:P for a fresh pair. */
export async function freeKvEventsEndpoint(): Promise<string> {
  return `tcp://127.0.0.1:${await freePortPair()}`;
}
