// CORS, as a browser exercises it, against a real gateway and real mock replicas over loopback: the preflight
// (OPTIONS with Origin and Access-Control-Request-Method) is answered by the gateway with 204 and never reaches
// a replica; actual responses (JSON, SSE, errors) to an allowed origin carry Access-Control-Allow-Origin, Vary
// and the exposed headers; a disallowed origin, or a gateway with no `cors` section, gets no CORS header at all;
// "*" allows any origin; a config reload changes the allowed origins.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { request, type IncomingMessage } from 'node:http';
import { parseConfig } from '../../../src/config/load.ts';
import { ALPHA_KEY, startStack, type TestStack } from '../../helpers/start-gateway.ts';

const APP = 'https://app.example.com';
const EVIL = 'https://evil.example.net';

let stack: TestStack;

before(async () => {
  stack = await startStack({ config: { cors: { allowed_origins: [APP, 'http://localhost:5173'], max_age_seconds: 900 } } });
});

after(async () => {
  await stack.close();
});

async function call(method: string, path: string, headers: Record<string, string>, body?: unknown): Promise<{ res: IncomingMessage; text: string }> {
  const res = await new Promise<IncomingMessage>((resolve, reject) => {
    const req = request(`${stack.url}${path}`, { method, headers: body === undefined ? headers : { 'content-type': 'application/json', ...headers } }, resolve);
    req.on('error', reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
  let text = '';
  for await (const c of res) text += String(c);
  return { res, text };
}

const corsHeaders = (res: IncomingMessage): string[] => Object.keys(res.headers).filter((h) => h.startsWith('access-control-'));

/** Requests every replica's engine has seen so far. */
const engineRequests = (): number => [...stack.replicas.values()].reduce((n, r) => n + r.engine.snapshot().requests.length, 0);

const preflight = (origin: string, path = '/v1/chat/completions'): Promise<{ res: IncomingMessage; text: string }> => call('OPTIONS', path, {
  origin,
  'access-control-request-method': 'POST',
  'access-control-request-headers': 'authorization, content-type, x-stainless-os, x-stainless-retry-count',
});

const chat = { model: 'gpt-fast', messages: [{ role: 'user', content: 'hi' }], max_tokens: 3 };

test('a preflight from an allowed origin is answered 204 by the gateway with the CORS grant, and reaches no replica', async () => {
  const before = engineRequests();
  for (const path of ['/v1/chat/completions', '/v1/completions', '/v1/models', '/v1/models/gpt-fast']) {
    const { res, text } = await preflight(APP, path);
    assert.equal(res.statusCode, 204, path);
    assert.equal(text, '');
    assert.equal(res.headers['content-length'], undefined, 'a 204 has no Content-Length');
    assert.equal(res.headers['access-control-allow-origin'], APP);
    assert.equal(res.headers['access-control-allow-methods'], path.includes('completions') ? 'POST, OPTIONS' : 'GET, OPTIONS');
    assert.equal(res.headers['access-control-allow-headers'], 'authorization, content-type, x-stainless-os, x-stainless-retry-count');
    assert.equal(res.headers['access-control-max-age'], '900');
    assert.match(String(res.headers.vary), /Origin/);
    assert.equal(res.headers['access-control-allow-credentials'], undefined);
  }
  // Without a list of request headers the grant names the ones the API needs.
  const bare = await call('OPTIONS', '/v1/chat/completions', { origin: 'http://localhost:5173', 'access-control-request-method': 'POST' });
  assert.equal(bare.res.statusCode, 204);
  assert.equal(bare.res.headers['access-control-allow-origin'], 'http://localhost:5173');
  assert.equal(bare.res.headers['access-control-allow-headers'], 'authorization, content-type, x-request-id');
  // A list that is not header names is not echoed.
  const odd = await call('OPTIONS', '/v1/chat/completions', { origin: APP, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, bad header: x' });
  assert.equal(odd.res.headers['access-control-allow-headers'], 'authorization, content-type, x-request-id');
  assert.equal(engineRequests(), before, 'no preflight was forwarded');
});

test('actual responses to an allowed origin carry Allow-Origin, Vary: Origin and the exposed headers (JSON, SSE and errors)', async () => {
  const json = await call('POST', '/v1/chat/completions', { authorization: `Bearer ${ALPHA_KEY}`, origin: APP }, chat);
  assert.equal(json.res.statusCode, 200, json.text);
  const sse = await call('POST', '/v1/chat/completions', { authorization: `Bearer ${ALPHA_KEY}`, origin: APP }, { ...chat, stream: true });
  assert.equal(sse.res.statusCode, 200);
  assert.ok(sse.text.endsWith('data: [DONE]\n\n'));
  const denied = await call('POST', '/v1/chat/completions', { authorization: 'Bearer sk-wrong', origin: APP }, chat);
  assert.equal(denied.res.statusCode, 401);
  const badBody = await call('POST', '/v1/completions', { authorization: `Bearer ${ALPHA_KEY}`, origin: APP }, { model: 'gpt-fast' });
  assert.equal(badBody.res.statusCode, 400);
  const models = await call('GET', '/v1/models', { authorization: `Bearer ${ALPHA_KEY}`, origin: APP });
  assert.equal(models.res.statusCode, 200);
  const wrongMethod = await call('GET', '/v1/chat/completions', { origin: APP });
  assert.equal(wrongMethod.res.statusCode, 405);
  for (const { res } of [json, sse, denied, badBody, models, wrongMethod]) {
    assert.equal(res.headers['access-control-allow-origin'], APP);
    assert.equal(res.headers.vary, 'Origin');
    const exposed = String(res.headers['access-control-expose-headers']).split(', ');
    for (const h of ['x-request-id', 'x-ratelimit-remaining-tokens', 'x-ratelimit-reset-tokens', 'retry-after', 'x-gateway-route']) assert.ok(exposed.includes(h), h);
    assert.equal(new Set(Object.keys(res.headers)).size, Object.keys(res.headers).length);
  }
  // The headers the page may read are really there.
  assert.ok(json.res.headers['x-request-id'] !== undefined && json.res.headers['x-ratelimit-remaining-tokens'] !== undefined);
});

test('a disallowed origin gets no CORS header on a preflight or an actual response, and is still served as before', async () => {
  const pre = await preflight(EVIL);
  assert.equal(pre.res.statusCode, 204);
  assert.deepEqual(corsHeaders(pre.res), []);
  assert.equal(pre.res.headers.allow, 'POST, OPTIONS');
  const actual = await call('POST', '/v1/chat/completions', { authorization: `Bearer ${ALPHA_KEY}`, origin: EVIL }, chat);
  assert.equal(actual.res.statusCode, 200);
  assert.deepEqual(corsHeaders(actual.res), []);
  assert.equal(actual.res.headers.vary, undefined);
  // Origins are whole: a suffix, a different scheme or port is another origin.
  for (const o of [`${APP}.evil.net`, 'http://app.example.com', 'https://app.example.com:8443', 'null']) {
    assert.deepEqual(corsHeaders((await preflight(o)).res), [], o);
  }
});

test('an OPTIONS on an unknown route is a 404; a plain OPTIONS (no Origin) is a 204 with Allow', async () => {
  const unknown = await preflight(APP, '/v1/nope');
  assert.equal(unknown.res.statusCode, 404);
  assert.equal((JSON.parse(unknown.text) as { error: { code: string } }).error.code, 'not_found');
  const plain = await call('OPTIONS', '/v1/models', {});
  assert.equal(plain.res.statusCode, 204);
  assert.equal(plain.res.headers.allow, 'GET, OPTIONS');
  assert.deepEqual(corsHeaders(plain.res), []);
});

test('a reload changes the allowed origins: "*" grants every origin with a literal *, and no section grants none', async () => {
  const base = stack.cfg as unknown as Record<string, unknown>;
  await stack.gateway.reload(parseConfig({ ...base, cors: { allowed_origins: ['*'] } }));
  const pre = await preflight(EVIL);
  assert.equal(pre.res.headers['access-control-allow-origin'], '*');
  assert.equal(pre.res.headers['access-control-max-age'], '600', 'the default max age');
  const actual = await call('POST', '/v1/chat/completions', { authorization: `Bearer ${ALPHA_KEY}`, origin: EVIL }, chat);
  assert.equal(actual.res.headers['access-control-allow-origin'], '*');
  assert.match(String(actual.res.headers['access-control-expose-headers']), /x-request-id/);

  const { cors: _cors, ...without } = base;
  await stack.gateway.reload(parseConfig(without));
  assert.deepEqual(corsHeaders((await preflight(APP)).res), []);
  assert.deepEqual(corsHeaders((await call('POST', '/v1/chat/completions', { authorization: `Bearer ${ALPHA_KEY}`, origin: APP }, chat)).res), []);
  await stack.gateway.reload(stack.cfg);
});
