// The response head the client parses: uws-sink.ts writes the whole header block through one uWS writeHeader
// call (later headers joined into the first one's value), so this pins that a real HTTP client still sees every
// header as its own field with its own value, on a JSON answer, an SSE stream and an error, and nothing else
// glued on. Raw node:http over loopback against a real mock replica process.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { request, type IncomingMessage } from 'node:http';
import { ALPHA_KEY, startStack, type TestStack } from '../../helpers/start-gateway.ts';
import { spawnMockReplica, type SpawnedReplica } from '../../helpers/mock-replicas.ts';

let stack: TestStack;
let replica: SpawnedReplica;

before(async () => {
  replica = await spawnMockReplica(['--profile', 'tiny', '--model', 'llama-3.1-8b-instruct', '--time-scale', '0.01']);
  stack = await startStack({
    pools: [{ id: '8b', model: 'llama-3.1-8b-instruct', replicas: [] }],
    externalReplicas: { '8b': [replica.url] },
  });
});

after(async () => {
  await stack.close();
  await replica.kill();
});

async function post(body: unknown, headers: Record<string, string>): Promise<{ res: IncomingMessage; text: string }> {
  const res = await new Promise<IncomingMessage>((resolve, reject) => {
    const req = request(`${stack.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers } }, resolve);
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
  let text = '';
  for await (const c of res) text += String(c);
  return { res, text };
}

const RATE_LIMIT = ['x-ratelimit-limit-tokens', 'x-ratelimit-remaining-tokens', 'x-ratelimit-reset-tokens', 'x-ratelimit-limit-requests', 'x-ratelimit-remaining-requests'];

function assertSeparateFields(res: IncomingMessage): void {
  for (let i = 0; i < res.rawHeaders.length; i += 2) {
    const [name, value] = [res.rawHeaders[i]!, res.rawHeaders[i + 1]!];
    assert.doesNotMatch(value, /[\r\n]|: /, `header ${name} carries no other header in its value`);
  }
  const names = res.rawHeaders.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase());
  assert.equal(new Set(names).size, names.length, `no header twice: ${names.join(', ')}`);
}

test('a JSON answer: content-type, x-request-id and the five rate-limit headers, each its own field', async () => {
  const { res, text } = await post({ model: 'llama-3.1-8b-instruct', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 }, { authorization: `Bearer ${ALPHA_KEY}`, 'x-request-id': 'hdr-json-1' });
  assert.equal(res.statusCode, 200);
  assert.equal(res.headers['content-type'], 'application/json');
  assert.equal(res.headers['x-request-id'], 'hdr-json-1');
  for (const h of RATE_LIMIT) assert.match(String(res.headers[h]), /^\d+s?$/, `${h}: ${res.headers[h]}`);
  assert.equal(Number(res.headers['content-length']), Buffer.byteLength(text));
  assert.equal((JSON.parse(text) as { object: string }).object, 'chat.completion');
  assertSeparateFields(res);
});

test('an SSE stream: event-stream headers, no-cache, x-accel-buffering and the rest, each its own field', async () => {
  const { res, text } = await post({ model: 'llama-3.1-8b-instruct', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4, stream: true }, { authorization: `Bearer ${ALPHA_KEY}`, 'x-request-id': 'hdr-sse-1' });
  assert.equal(res.statusCode, 200);
  assert.equal(res.headers['content-type'], 'text/event-stream; charset=utf-8');
  assert.equal(res.headers['cache-control'], 'no-cache');
  assert.equal(res.headers['x-accel-buffering'], 'no');
  assert.equal(res.headers['x-request-id'], 'hdr-sse-1');
  for (const h of RATE_LIMIT) assert.ok(res.headers[h] !== undefined, h);
  assert.ok(text.endsWith('data: [DONE]\n\n'), text.slice(-40));
  assertSeparateFields(res);
});

test('an error answer (bad key): JSON content-type and the request id, each its own field', async () => {
  const { res, text } = await post({ model: 'llama-3.1-8b-instruct', messages: [{ role: 'user', content: 'hi' }] }, { authorization: 'Bearer sk-wrong', 'x-request-id': 'hdr-401' });
  assert.equal(res.statusCode, 401);
  assert.equal(res.headers['content-type'], 'application/json');
  assert.equal(res.headers['x-request-id'], 'hdr-401');
  assert.equal((JSON.parse(text) as { error: { code: string } }).error.code, 'invalid_api_key');
  assertSeparateFields(res);
});
