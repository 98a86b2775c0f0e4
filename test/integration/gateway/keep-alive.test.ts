// `Keep-Alive: timeout=5` over real HTTP (node:http on loopback): on every response after which the connection
// stays open (a relayed JSON answer, a relayed SSE stream, the gateway's own errors, /metrics, /healthz), and
// on none that closes it (the client said `Connection: close`; a 431). uWS closes idle connections after 8-12 s
// without a word; the header tells clients to retire idle sockets before that (src/server/uws-sink.ts). And
// the gateway's close() ends the idle ones at once.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Agent, request, type IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { ALPHA_KEY, startStack, type TestStack } from '../../helpers/start-gateway.ts';
import { KEEP_ALIVE_TIMEOUT_S } from '../../../src/server/uws-sink.ts';

let stack: TestStack;
const agent = new Agent({ keepAlive: true, maxSockets: 1 });

before(async () => {
  stack = await startStack();
});

after(async () => {
  agent.destroy();
  await stack.close();
});

interface Reply { res: IncomingMessage; text: string; reused: boolean }

/** `fresh`: on a connection of its own (the requests that close theirs stay off the shared agent). */
function call(method: string, path: string, opts: { body?: unknown; headers?: Record<string, string>; fresh?: true } = {}): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request(`${stack.url}${path}`, { method, agent: opts.fresh ? false : agent, headers: { authorization: `Bearer ${ALPHA_KEY}`, 'content-type': 'application/json', ...opts.headers } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => { text += c; });
      res.on('end', () => resolve({ res, text, reused: req.reusedSocket }));
    });
    req.on('error', reject);
    req.end(opts.body === undefined ? undefined : JSON.stringify(opts.body));
  });
}

const CHAT = { model: 'gpt-fast', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 };
const EXPECTED = `timeout=${KEEP_ALIVE_TIMEOUT_S}`;

test('the advertised timeout is below uWS idle close (10 s on a 4 s tick: never before 8 s)', () => {
  assert.ok(KEEP_ALIVE_TIMEOUT_S > 0 && KEEP_ALIVE_TIMEOUT_S < 8);
});

test('a relayed JSON completion says Keep-Alive: timeout=5, and the next request reuses the socket', async () => {
  const a = await call('POST', '/v1/chat/completions', { body: CHAT });
  assert.equal(a.res.statusCode, 200, a.text);
  assert.equal(a.res.headers['keep-alive'], EXPECTED);
  assert.equal(a.res.headers.connection, undefined);
  const b = await call('POST', '/v1/chat/completions', { body: CHAT });
  assert.equal(b.res.statusCode, 200, b.text);
  assert.equal(b.reused, true, 'the connection stayed open');
});

test('a relayed SSE stream says it too', async () => {
  const r = await call('POST', '/v1/chat/completions', { body: { ...CHAT, stream: true } });
  assert.equal(r.res.statusCode, 200, r.text);
  assert.match(String(r.res.headers['content-type']), /^text\/event-stream/);
  assert.equal(r.res.headers['keep-alive'], EXPECTED);
  assert.match(r.text, /data: \[DONE\]/);
});

test("the gateway's own answers say it: a 401, a 404, a 400, /metrics and /healthz", async () => {
  const unauthorized = await call('POST', '/v1/chat/completions', { body: CHAT, headers: { authorization: 'Bearer sk-nope' } });
  assert.equal(unauthorized.res.statusCode, 401);
  assert.equal(unauthorized.res.headers['keep-alive'], EXPECTED);
  const notFound = await call('GET', '/nowhere');
  assert.equal(notFound.res.statusCode, 404);
  assert.equal(notFound.res.headers['keep-alive'], EXPECTED);
  const invalid = await call('POST', '/v1/chat/completions', { body: { ...CHAT, max_tokens: -1 } });
  assert.equal(invalid.res.statusCode, 400, invalid.text);
  assert.equal(invalid.res.headers['keep-alive'], EXPECTED);
  const metrics = await call('GET', '/metrics');
  assert.equal(metrics.res.statusCode, 200);
  assert.equal(metrics.res.headers['keep-alive'], EXPECTED);
  const health = await call('GET', '/healthz');
  assert.equal(health.res.headers['keep-alive'], EXPECTED);
});

test('no Keep-Alive on a response after which the connection closes', async () => {
  for (const [method, path, body] of [['POST', '/v1/chat/completions', CHAT], ['POST', '/v1/chat/completions', { ...CHAT, stream: true }], ['GET', '/metrics', undefined], ['GET', '/nowhere', undefined]] as const) {
    const r = await call(method, path, { body, headers: { connection: 'close' }, fresh: true });
    assert.ok(r.res.statusCode === 200 || r.res.statusCode === 404, `${path}: ${r.res.statusCode}`);
    assert.equal(r.res.headers['keep-alive'], undefined, `${method} ${path} with Connection: close`);
  }
  // Asked to keep the connection, the gateway closes it after a 431 and says so.
  const tooLarge = await call('GET', '/v1/models', { headers: { 'x-pad': 'p'.repeat(17 * 1024) } });
  assert.equal(tooLarge.res.statusCode, 431);
  assert.equal(tooLarge.res.headers['keep-alive'], undefined);
  assert.equal(tooLarge.res.headers.connection, 'close');
});

test("close() ends the idle kept-alive connections too: a client's pooled socket does not outlive the gateway", async () => {
  const own = await startStack();
  const pooled = new Agent({ keepAlive: true, maxSockets: 1 });
  try {
    const socket = await new Promise<Socket>((resolve, reject) => {
      const req = request(`${own.url}/healthz`, { agent: pooled }, (res) => {
        res.resume();
        res.on('end', () => resolve(req.socket!));
      });
      req.on('error', reject);
      req.end();
    });
    const ended = new Promise<boolean>((done) => socket.once('close', () => done(true)));
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(socket.destroyed, false, 'idle in the pool, open at both ends');
    await own.close();
    // Without it the socket stays until uWS's idle sweep (8-12 s) or the client's own timeout.
    const closed = await Promise.race([ended, new Promise<boolean>((r) => setTimeout(() => r(false), 5000))]);
    assert.ok(closed, 'the idle connection was closed by close()');
  } finally {
    pooled.destroy();
  }
});
