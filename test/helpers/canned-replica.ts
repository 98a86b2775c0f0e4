// A replica stand-in for gateway tests: serves a healthy vLLM /metrics page and /health, and answers
// every completion with the JSON body `answer()` returns at that moment, so a test controls exactly what the
// replica reports (usage numbers of the wrong type, bodies that look like usage, ...).
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { renderPage } from '../integration/registry/vllm-page-server.ts';
import { startStack, type TestStack } from './start-gateway.ts';

export interface CannedReplica {
  url: string;
  close(): Promise<void>;
}

export async function startCannedReplica(answer: () => string): Promise<CannedReplica> {
  const page = renderPage({ running: 0, waiting: 0, kvUsage: 0.1, blockSize: 16, startSeconds: 1762301190.5, runningAdapters: '', waitingAdapters: '' });
  const server = createServer((req, res) => {
    if (req.url === '/metrics') return void res.writeHead(200, { 'content-type': 'text/plain' }).end(page);
    if (req.url === '/health') return void res.writeHead(200).end();
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end(answer()));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/** A gateway stack (pool `8b`, alias `gpt-fast`) whose one replica is a canned replica. */
export async function startCannedStack(answer: () => string): Promise<{ stack: TestStack; close(): Promise<void> }> {
  const replica = await startCannedReplica(answer);
  const stack = await startStack({
    pools: [{ id: '8b', model: 'llama-3.1-8b-instruct', aliases: ['gpt-fast'], replicas: [] }],
    externalReplicas: { '8b': [replica.url] },
  });
  return {
    stack,
    close: async () => {
      await stack.close();
      await replica.close();
    },
  };
}
