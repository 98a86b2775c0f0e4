// previous_response_id with two acceptor threads (server.threads: 2): each turn of a conversation goes on a
// connection of its own, so the kernel spreads the turns over both threads; every follow-up still reaches the
// replica that stored its previous response, because each thread's owner map is replicated to the other.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { ALPHA_KEY, startStack, type TestStack } from '../../helpers/start-gateway.ts';

let stack: TestStack;

before(async () => {
  stack = await startStack({
    config: { server: { host: '127.0.0.1', port: 0, shutdown_grace_ms: 2000, threads: 2 }, tokenizer: { threads: 0 }, routing: { policy: 'round-robin' } },
  });
});
after(async () => {
  await stack?.close();
});

/** One Responses request on a fresh connection (agent: false). */
function create(body: Record<string, unknown>): Promise<{ status: number; replica: string; json: { id?: string; error?: { code: string } } }> {
  return new Promise((resolve, reject) => {
    const req = request(`${stack.url}/v1/responses`, {
      method: 'POST', agent: false, headers: { 'content-type': 'application/json', authorization: `Bearer ${ALPHA_KEY}` },
    }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({
        status: res.statusCode ?? 0,
        replica: /replica=([^;]+)/.exec(String(res.headers['x-gateway-route'] ?? ''))?.[1] ?? '',
        json: JSON.parse(text) as { id?: string },
      }));
    });
    req.on('error', reject);
    req.end(JSON.stringify({ model: 'gpt-fast', max_output_tokens: 4, ...body }));
  });
}

async function perAcceptor(): Promise<number[]> {
  const page = await (await fetch(`${stack.url}/metrics`)).text();
  const out = [0, 0];
  for (const m of page.matchAll(/^gateway_acceptor_requests_total\{acceptor="(\d+)"\} (\d+)$/gm)) out[Number(m[1])] = Number(m[2]);
  return out;
}

test('follow-ups arriving on either acceptor thread reach the replica that stored the conversation', async () => {
  const first = await create({ input: 'Start a story.' });
  assert.equal(first.status, 200);
  let prev = first.json.id!;
  for (let turn = 0; turn < 11; turn++) {
    const next = await create({ input: `Turn ${turn}.`, previous_response_id: prev });
    assert.equal(next.status, 200, `turn ${turn}: ${JSON.stringify(next.json)}`);
    assert.equal(next.replica, first.replica, `turn ${turn} on the owner`);
    prev = next.json.id!;
  }
  // 12 fresh connections: both threads took some (all on one would be a 1-in-2,048 draw).
  const counts = await perAcceptor();
  assert.ok(counts[0]! > 0 && counts[1]! > 0, `requests per acceptor: ${counts.join(', ')}`);
});
