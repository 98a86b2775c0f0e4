// API keys never leave the gateway: requests with valid, unknown and malformed keys (in the Authorization
// header, in other headers, in the query string, duplicated) run through a gateway logging at trace level,
// in front of a real mock replica reached through a recording TCP relay; then the log output, the /metrics
// page, the usage records, every response (head and body) and every byte the gateway sent the replica are
// searched for each key and for every 8-character piece of its secret part. None may appear.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Writable } from 'node:stream';
import { sendRaw } from '../../helpers/raw-http.ts';
import { startMockReplica, type MockReplica } from '../../helpers/mock-replicas.ts';
import { startStack, waitFor, type TestStack } from '../../helpers/start-gateway.ts';
import { createLogger } from '../../../src/logging/logger.ts';

const MODEL = 'llama-3.1-8b-instruct';
// Valid keys of two tenants, and keys the gateway must refuse; each secret part is distinctive.
const VALID = ['sk-live-Qz7XpL2mN9vB4rT8wKc3', 'sk-live-Hd5JfR1sY6uE0aZq2Wn7'];
const INVALID = ['sk-live-Gm4TbV8cX1pL7sD3hQy9', 'sk-proj-Ue2Ri9Oa5Ks8Lf1Mz6Nb3Vc'];
const KEYS = [...VALID, ...INVALID];
const sha = (k: string): string => createHash('sha256').update(k).digest('hex');

/** The key and every 8-character window of the part after its `sk-…-` prefix. */
function needles(key: string): string[] {
  const secret = key.slice(key.indexOf('-', 3) + 1);
  const out = [key, secret];
  for (let i = 0; i + 8 <= secret.length; i++) out.push(secret.slice(i, i + 8));
  return out;
}

/** A TCP relay to the replica that keeps every byte the gateway sends it. */
async function recordingRelay(target: URL): Promise<{ url: string; sent: () => string; close: () => Promise<void> }> {
  const chunks: Buffer[] = [];
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect(Number(target.port), target.hostname);
    sockets.add(client).add(upstream);
    client.on('data', (d: Buffer) => {
      chunks.push(Buffer.from(d));
      upstream.write(d);
    });
    upstream.pipe(client);
    const end = (): void => {
      client.destroy();
      upstream.destroy();
    };
    client.on('close', end).on('error', end);
    upstream.on('close', end).on('error', end);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}`,
    sent: () => Buffer.concat(chunks).toString('latin1'),
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

let replica: MockReplica;
let relay: Awaited<ReturnType<typeof recordingRelay>>;
let stack: TestStack;
let logText = '';
let port: number;

before(async () => {
  replica = await startMockReplica({ profile: 'tiny', model: MODEL, timeScale: 0.01 });
  relay = await recordingRelay(new URL(replica.url));
  const destination = new Writable({ write(chunk: Buffer, _enc, cb) { logText += chunk.toString(); cb(); } });
  stack = await startStack({
    pools: [{ id: '8b', model: MODEL, aliases: ['gpt-fast'], replicas: [] }],
    externalReplicas: { '8b': [relay.url] },
    logger: createLogger('trace', { destination }),
    config: {
      server: { host: '127.0.0.1', port: 0, shutdown_grace_ms: 2000, max_body_bytes: 4096 },
      tenants: [
        { name: 'acme', api_keys: [{ sha256: sha(VALID[0]!) }], tokens_per_second: 1_000_000, burst_tokens: 10_000_000, max_inflight: 64 },
        { name: 'small', api_keys: [{ sha256: sha(VALID[1]!) }], tokens_per_second: 1, burst_tokens: 100, max_inflight: 1 },
      ],
    },
  });
  port = Number(new URL(stack.url).port);
});

after(async () => {
  await stack.close();
  await relay.close();
  await replica.close();
});

const chat = (extra: Record<string, unknown> = {}): string => JSON.stringify({ model: 'gpt-fast', messages: [{ role: 'user', content: 'hi' }], max_tokens: 3, ...extra });

function request(method: string, path: string, headers: string[], body = ''): string {
  const lines = [`${method} ${path} HTTP/1.1`, 'host: gw', ...headers];
  if (body !== '' || method === 'POST') lines.push('content-type: application/json', `content-length: ${Buffer.byteLength(body)}`);
  return `${lines.join('\r\n')}\r\n\r\n${body}`;
}

test('no API key, valid or not, appears in logs, metrics, usage records, responses or what the replica receives', async () => {
  const replies: string[] = [];
  const sent: string[] = [];
  const send = async (raw: string): Promise<void> => {
    sent.push(raw);
    replies.push((await sendRaw('127.0.0.1', port, [raw], 5000)).text);
  };
  // One client per key, side by side.
  await Promise.all(KEYS.map(async (key) => {
    const auth = `authorization: Bearer ${key}`;
    await send(request('POST', '/v1/chat/completions', [auth], chat()));
    await send(request('POST', '/v1/chat/completions', [auth], chat({ stream: true, stream_options: { include_usage: true } })));
    await send(request('POST', '/v1/completions', [auth], JSON.stringify({ model: 'gpt-fast', prompt: 'hi', max_tokens: 2 })));
    await send(request('POST', '/v1/chat/completions', [auth], chat({ model: 'nope' })));
    await send(request('POST', '/v1/chat/completions', [auth], '{"model":'));
    await send(request('POST', '/v1/chat/completions', [auth], chat({ max_tokens: 100_000 })));
    await send(request('POST', '/v1/chat/completions', [auth], 'x'.repeat(5000)));
    await send(request('GET', '/v1/models', [auth]));
    await send(request('GET', '/v1/models/gpt-fast', [auth]));
    await send(request('DELETE', '/v1/chat/completions', [auth]));
    await send(request('GET', '/v2/unknown', [auth]));
    // Malformed and misplaced keys.
    await send(request('POST', '/v1/chat/completions', [`authorization: Basic ${Buffer.from(`user:${key}`).toString('base64')}`], chat()));
    await send(request('POST', '/v1/chat/completions', [`authorization: ${key}`], chat()));
    await send(request('POST', '/v1/chat/completions', [`authorization: Bearer ${key} trailing`], chat()));
    await send(request('POST', '/v1/chat/completions', [`authorization: Bearer ${key}`, `authorization: Bearer ${key}`], chat()));
    await send(request('POST', '/v1/chat/completions', [`x-api-key: ${key}`, `api-key: ${key}`], chat()));
    await send(request('POST', `/v1/chat/completions?api_key=${key}`, [auth], chat()));
    await send(request('POST', '/v1/chat/completions', [`authorization: Bearer ${key}`, 'transfer-encoding: gzip, chunked'], chat()));
    // A client that leaves mid-upload, and one that leaves mid-stream.
    await sendRaw('127.0.0.1', port, [request('POST', '/v1/chat/completions', [auth], chat()).slice(0, -10)], 200, true);
    await sendRaw('127.0.0.1', port, [request('POST', '/v1/chat/completions', [auth], chat({ stream: true, max_tokens: 200 }))], 30, true);
  }));
  // The small tenant's second request in flight is refused (429), its burst too (429 rate limit).
  await Promise.all([0, 1, 2].map(() => send(request('POST', '/v1/chat/completions', [`authorization: Bearer ${VALID[1]}`], chat({ max_tokens: 50 })))));
  await waitFor(() => stack.gateway.inflightCount === 0, 5000, 20);

  const statuses = replies.map((r) => Number(/^HTTP\/1\.1 (\d{3})/.exec(r)?.[1] ?? 0));
  for (const s of [200, 400, 401, 404, 405, 413, 429]) assert.ok(statuses.includes(s), `a ${s} among the replies (${[...new Set(statuses)].join(', ')})`);
  assert.ok(statuses.filter((s) => s === 200).length >= 8, 'the valid keys were served');

  const metrics = await (await fetch(`${stack.url}/metrics`)).text();
  await stack.usage();
  const usage = readFileSync(stack.usagePath, 'utf8');
  await new Promise((r) => setTimeout(r, 100)); // the logger's last lines
  assert.ok(logText.length > 10_000 && usage.includes('"tenant":"acme"') && relay.sent().includes('POST /v1/chat/completions'), 'everything was captured');
  const places: Array<[string, string]> = [['log', logText], ['metrics', metrics], ['usage', usage], ['responses', replies.join('\n')], ['to the replica', relay.sent()]];
  // The search itself finds every needle where the keys were put: in the requests.
  for (const key of KEYS) for (const n of needles(key)) assert.ok(sent.join('\n').includes(n), n);
  const leaks: string[] = [];
  for (const key of KEYS) {
    for (const n of needles(key)) {
      for (const [where, text] of places) if (text.includes(n)) leaks.push(`${JSON.stringify(n)} (of ${key}) in ${where}`);
    }
  }
  assert.deepEqual(leaks, []);
});
