// A replica that sends its stream in large bursts, to a client that stops reading for a while: every upstream
// read then carries more than uWS's 16 KiB cork buffer, and the client's socket fills. Each event must still
// reach the client, whole and in order. (In this uWS build a cork that overflows while the kernel's send
// buffer is full drops the overflowing write's bytes after its chunk-size line; the sink keeps corks within
// the buffer. Without that, the client's HTTP parser fails a few MiB into the stream.)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, request, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { renderPage } from '../registry/vllm-page-server.ts';
import { ALPHA_KEY, startStack } from '../../helpers/start-gateway.ts';

const EVENTS = 120_000;
const BURST_EVENTS = 2_000; // ≈ 300 KiB per burst: the gateway's reads come in 64 KiB pieces

function event(i: number): string {
  return `data: {"id":"chatcmpl-burst","object":"chat.completion.chunk","created":1,"model":"llama-3.1-8b-instruct","choices":[{"index":0,"delta":{"content":" t${i}"},"logprobs":null,"finish_reason":null}]}\n\n`;
}

async function startBurstReplica(): Promise<{ url: string; close(): Promise<void> }> {
  const page = renderPage({ running: 0, waiting: 0, kvUsage: 0.1, blockSize: 16, startSeconds: 1762301190.5, runningAdapters: '', waitingAdapters: '' });
  const server = createServer((req, res) => {
    if (req.url === '/metrics') return void res.writeHead(200, { 'content-type': 'text/plain' }).end(page);
    if (req.url === '/health') return void res.writeHead(200).end();
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      let i = 0;
      const more = (): void => {
        // One HTTP chunk per event, as vLLM sends them, many per write burst: the gateway's reads then
        // carry hundreds of small events, each relayed as its own write into one cork.
        while (i < EVENTS) {
          let ok = true;
          for (const end = Math.min(EVENTS, i + BURST_EVENTS); i < end; i++) ok = res.write(event(i));
          if (!ok) return void res.once('drain', more);
        }
        res.end('data: [DONE]\n\n');
      };
      more();
    });
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

test('a stream sent in bursts larger than the cork buffer reaches a client that stalled, every event whole and in order', { timeout: 120_000 }, async (t) => {
  const replica = await startBurstReplica();
  const stack = await startStack({
    pools: [{ id: '8b', model: 'llama-3.1-8b-instruct', maxContextTokens: 131072, replicas: [] }],
    externalReplicas: { '8b': [replica.url] },
  });
  t.after(async () => {
    await stack.close();
    await replica.close();
  });

  for (let round = 0; round < 1; round++) { // one round fails without the fix on a quiet machine; a loaded one may not fill the socket in time
    const body = JSON.stringify({ model: 'llama-3.1-8b-instruct', messages: [{ role: 'user', content: 'burst' }], stream: true });
    const res = await new Promise<IncomingMessage>((resolve, reject) => {
      const req = request(`${stack.url}/v1/chat/completions`, { method: 'POST', agent: false, headers: { authorization: `Bearer ${ALPHA_KEY}`, 'content-type': 'application/json' } }, resolve);
      req.on('error', reject);
      req.end(body);
    });
    assert.equal(res.statusCode, 200);
    res.setEncoding('utf8');
    let text = '';
    const done = new Promise<void>((resolve, reject) => {
      res.on('data', (c: string) => { text += c; });
      res.on('end', () => resolve());
      res.on('error', (err) => reject(new Error(`round ${round}: the stream broke after ${text.length} bytes: ${err.message}`)));
    });
    // Stall: the gateway's writes fill the client's socket while the replica keeps sending bursts.
    res.pause();
    await new Promise((r) => setTimeout(r, 2500));
    res.resume();
    await done;
    const events = text.split('\n\n').filter((e) => e.length > 0);
    assert.equal(events.at(-1), 'data: [DONE]', `round ${round}: ends with [DONE]`);
    assert.equal(events.length, EVENTS + 1, `round ${round}: every event arrived`);
    for (let i = 0; i < EVENTS; i++) {
      if (events[i] !== event(i).slice(0, -2)) assert.fail(`round ${round}: event ${i} is ${JSON.stringify(events[i]?.slice(0, 200))}`);
    }
  }
});
