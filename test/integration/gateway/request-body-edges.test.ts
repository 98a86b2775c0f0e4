// The body reader's edge cases over a raw socket (fetch hides them): an empty POST, a chunked body,
// a declared length over the limit, a chunked body over the limit, an upload abandoned half way, and an
// unauthenticated request with a body. Each must be answered (or settled) promptly and leave nothing in flight.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { sendRaw, type RawReply } from '../../helpers/raw-http.ts';
import { ALPHA_KEY, startStack, waitFor, type TestStack } from '../../helpers/start-gateway.ts';

let stack: TestStack;
let host: string;
let port: number;

before(async () => {
  stack = await startStack({ config: { server: { host: '127.0.0.1', port: 0, shutdown_grace_ms: 2000, max_body_bytes: 4096 } } });
  const u = new URL(stack.url);
  host = u.hostname;
  port = Number(u.port);
});

after(async () => {
  await stack.close();
});

/** Sends raw bytes, resolves with what came back once the server answered (or closed, or timeoutMs passed). */
function raw(parts: Array<string | Buffer>, timeoutMs = 3000, keepOpen = false): Promise<RawReply> {
  return sendRaw(host, port, parts, timeoutMs, keepOpen);
}

const head = (extra: string): string =>
  `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${ALPHA_KEY}\r\ncontent-type: application/json\r\n${extra}\r\n`;

function statusOf(text: string): number {
  return Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
}

test('an empty POST body is a 400 invalid_json, answered at once', async () => {
  const r = await raw([head('content-length: 0\r\n')]);
  assert.equal(statusOf(r.text), 400, r.text);
  assert.match(r.text, /"code":"invalid_json"/);
});

test('a chunked body is read whole', async () => {
  const body = JSON.stringify({ model: 'gpt-fast', messages: [{ role: 'user', content: 'hi' }], max_tokens: 3 });
  const a = body.slice(0, 10);
  const b = body.slice(10);
  const r = await raw([head('transfer-encoding: chunked\r\n'), `${a.length.toString(16)}\r\n${a}\r\n`, `${b.length.toString(16)}\r\n${b}\r\n0\r\n\r\n`]);
  assert.equal(statusOf(r.text), 200, r.text);
});

test('a declared length over max_body_bytes is a 413 before the body is read', async () => {
  const r = await raw([head('content-length: 5000\r\n')]);
  assert.equal(statusOf(r.text), 413, r.text);
  assert.match(r.text, /"code":"request_too_large"/);
});

test('a chunked body that grows over max_body_bytes is a 413', async () => {
  const chunk = 'x'.repeat(3000);
  const r = await raw([head('transfer-encoding: chunked\r\n'), `${chunk.length.toString(16)}\r\n${chunk}\r\n`, `${chunk.length.toString(16)}\r\n${chunk}\r\n`]);
  assert.equal(statusOf(r.text), 413, r.text);
});

test('an upload abandoned half way is settled as a cancel (usage record 499, nothing in flight)', async () => {
  const id = 'half-upload';
  await raw([head(`content-length: 200\r\nx-request-id: ${id}\r\n`), '{"model":"gpt-fast",'], 300, true);
  const rec = await waitFor(async () => (await stack.usage()).find((r) => r.request_id === id), 3000, 20);
  assert.equal(rec.status, 499);
  assert.equal(rec.cancelled, true);
  await waitFor(() => stack.gateway.inflightCount === 0, 2000, 10);
});

test('an unknown key with a body is a 401 and leaves nothing in flight', async () => {
  const body = JSON.stringify({ model: 'gpt-fast', messages: [{ role: 'user', content: 'hi' }] });
  const r = await raw([`POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer sk-nope\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n`, body]);
  assert.equal(statusOf(r.text), 401, r.text);
  await waitFor(() => stack.gateway.inflightCount === 0, 2000, 10);
});
