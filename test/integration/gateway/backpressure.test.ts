// A client that reads slowly must not make the gateway buffer the stream: when uWS reports backpressure the
// gateway stops reading the replica's socket until the client drains. Observed from outside: the replica (its
// own process) keeps generating, the tokens the gateway has relayed (its in-flight ledger) stop growing, the
// gateway's memory stays flat; on resume every token arrives.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { request, type IncomingMessage } from 'node:http';
import { ALPHA_KEY, startStack, waitFor, type TestStack } from '../../helpers/start-gateway.ts';
import { spawnMockReplica, type SpawnedReplica } from '../../helpers/mock-replicas.ts';
import { LEDGER_OUTPUT_TOKENS } from '../../../src/registry/inflight-ledger.ts';

let stack: TestStack;
let replica: SpawnedReplica;
const MAX_TOKENS = 40_000;

before(async () => {
  replica = await spawnMockReplica(['--profile', 'llama-8b-a100', '--model', 'llama-3.1-8b-instruct', '--time-scale', '0.01']);
  stack = await startStack({
    pools: [{ id: '8b', model: 'llama-3.1-8b-instruct', maxContextTokens: 131072, replicas: [] }],
    externalReplicas: { '8b': [replica.url] },
  });
});

after(async () => {
  await stack.close();
  await replica.kill();
});

async function generated(): Promise<number> {
  const st = await (await fetch(`${replica.url}/_mock/state`)).json() as { requests: Array<{ id: string; output_tokens: number }> };
  return st.requests.find((r) => r.id === 'slow-reader')?.output_tokens ?? 0;
}

test('a slow reader pauses the upstream instead of growing the gateway memory, and still gets every token', { timeout: 120_000 }, async () => {
  const body = JSON.stringify({ model: 'llama-3.1-8b-instruct', messages: [{ role: 'user', content: 'stream a lot' }], max_tokens: MAX_TOKENS, ignore_eos: true, stream: true });
  const res = await new Promise<IncomingMessage>((resolve, reject) => {
    const req = request(`${stack.url}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${ALPHA_KEY}`, 'content-type': 'application/json', 'x-request-id': 'slow-reader' } }, resolve);
    req.on('error', reject);
    req.end(body);
  });
  assert.equal(res.statusCode, 200);
  let tail = '';
  await new Promise<void>((resolve) => res.once('data', (c: Buffer) => {
    res.pause(); // synchronously: no chunk may be emitted without a listener
    tail = c.toString('utf8');
    resolve();
  }));
  const rssBefore = process.memoryUsage().rss;
  const slot = stack.gateway.registry.slotOf('8b-x1');
  const relayed = (): number => stack.gateway.registry.ledger.get(slot, LEDGER_OUTPUT_TOKENS);

  // Socket buffers fill first (a few MiB on loopback); then the replica runs ahead of the gateway.
  await waitFor(async () => (await generated()) - relayed() > 5000, 90_000, 100);
  const held = relayed();
  const genThen = await generated();
  await new Promise((r) => setTimeout(r, 700));
  assert.equal(relayed(), held, 'the gateway read nothing more from the replica while the client was stalled');
  assert.ok((await generated()) > genThen || genThen >= MAX_TOKENS, 'the replica kept generating');
  const grownMiB = (process.memoryUsage().rss - rssBefore) / 2 ** 20;
  assert.ok(grownMiB < 32, `gateway RSS grew ${grownMiB.toFixed(1)} MiB`);

  // Resume: the whole stream arrives intact, ending with [DONE].
  let tokens = 0;
  let sawDone = false;
  res.setEncoding('utf8');
  res.on('data', (c: string) => {
    tail += c;
    const cut = tail.lastIndexOf('\n\n');
    if (cut >= 0) {
      const complete = tail.slice(0, cut);
      tokens += (complete.match(/"delta":\{"content"/g) ?? []).length;
      if (complete.includes('data: [DONE]')) sawDone = true;
      tail = tail.slice(cut);
    }
  });
  res.resume();
  await new Promise<void>((resolve) => res.on('end', () => resolve()));
  tokens += (tail.match(/"delta":\{"content"/g) ?? []).length;
  assert.ok(sawDone || tail.includes('data: [DONE]'), 'the stream ends with [DONE]');
  assert.equal(tokens, MAX_TOKENS, 'every token frame arrived, in one piece');
  const rec = await waitFor(async () => (await stack.usage()).find((r) => r.request_id === 'slow-reader'));
  assert.equal(rec.output_tokens, MAX_TOKENS);
});
