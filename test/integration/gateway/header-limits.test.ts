// The head-size cap over raw TCP on loopback: what a client sees for each size of request head. The gateway
// answers 431 (OpenAI body, connection closed) for a head over server.max_header_bytes that uWS parsed; uWS
// closes, without an answer, a head that has not ended after 4 KiB of one read sequence (its parser's
// compiled-in fallback buffer) and a 1 MB header line, after reading at most one 512 KiB socket read of it.
// A single write of up to ~64 KiB arrives in one read on loopback, which is how a 15 KB head gets served.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { sendRaw, type RawReply } from '../../helpers/raw-http.ts';
import { ALPHA_KEY, startStack, waitFor, type TestStack } from '../../helpers/start-gateway.ts';

let stack: TestStack;
let host: string;
let port: number;

before(async () => {
  stack = await startStack();
  const u = new URL(stack.url);
  host = u.hostname;
  port = Number(u.port);
});

after(async () => {
  await stack.close();
});

const BODY = JSON.stringify({ model: 'gpt-fast', messages: [{ role: 'user', content: 'hi' }], max_tokens: 3 });

/** A chat completion request whose head is exactly `headBytes` long (an `x-pad` field makes up the rest). */
function chatOfHeadSize(headBytes: number): string {
  const start = `POST /v1/chat/completions HTTP/1.1\r\nhost: gw\r\nauthorization: Bearer ${ALPHA_KEY}\r\ncontent-type: application/json\r\ncontent-length: ${BODY.length}\r\nx-request-id: hl-${headBytes}\r\n`;
  const pad = headBytes - start.length - 'x-pad: \r\n\r\n'.length;
  const head = `${start}x-pad: ${'p'.repeat(pad)}\r\n\r\n`;
  assert.equal(head.length, headBytes);
  return head + BODY;
}

function statusOf(r: RawReply): number {
  return Number(/^HTTP\/1\.1 (\d{3})/.exec(r.text)?.[1] ?? 0);
}

function bodyOf(r: RawReply): string {
  return r.text.slice(r.text.indexOf('\r\n\r\n') + 4);
}

const TOO_LARGE_BODY = {
  error: { message: 'The request headers are too large; the connection is closed.', type: 'invalid_request_error', param: null, code: 'request_header_fields_too_large' },
};

test('a 15 KB head is served', async () => {
  const r = await sendRaw(host, port, [chatOfHeadSize(15 * 1024)], 5000);
  assert.equal(statusOf(r), 200, r.text.slice(0, 300));
  assert.equal((JSON.parse(bodyOf(r)) as { object: string }).object, 'chat.completion');
});

test('a head of exactly server.max_header_bytes is served; one byte more is 431', async () => {
  const at = await sendRaw(host, port, [chatOfHeadSize(stack.cfg.server.max_header_bytes)], 5000);
  assert.equal(statusOf(at), 200, at.text.slice(0, 300));
  const over = await sendRaw(host, port, [chatOfHeadSize(stack.cfg.server.max_header_bytes + 1)], 5000);
  assert.equal(statusOf(over), 431, over.text.slice(0, 300));
});

test('a 17 KB head is 431 with the OpenAI body, the request id, no keep-alive, and the connection closed', async () => {
  const r = await sendRaw(host, port, [chatOfHeadSize(17 * 1024)], 5000, true);
  assert.equal(statusOf(r), 431, r.text.slice(0, 300));
  assert.match(r.text, /^HTTP\/1\.1 431 Request Header Fields Too Large\r\n/);
  assert.deepEqual(JSON.parse(bodyOf(r)), TOO_LARGE_BODY);
  assert.match(r.text, /\r\nx-request-id: hl-17408\r\n/);
  assert.match(r.text, /\r\nConnection: close\r\n/i);
  assert.doesNotMatch(r.text, /keep-alive:/i);
  assert.equal(r.closed, true, 'the gateway closes the connection after the 431');
  // Refused before the pipeline: nothing stays in flight, and the refusal is counted like any other.
  await waitFor(() => stack.gateway.inflightCount === 0);
  const metrics = await (await fetch(`${stack.url}/metrics`)).text();
  assert.match(metrics, /gateway_requests_total\{route="chat",pool="[^"]*",status="431",code="request_header_fields_too_large"\} [1-9]/);
});

test('the cap holds on every route: GET /v1/models and an unknown path answer 431; HEAD answers it without a body', async () => {
  const pad = `x-pad: ${'p'.repeat(17 * 1024)}\r\n`;
  const models = await sendRaw(host, port, [`GET /v1/models HTTP/1.1\r\nhost: gw\r\nauthorization: Bearer ${ALPHA_KEY}\r\n${pad}\r\n`], 5000, true);
  assert.equal(statusOf(models), 431, models.text.slice(0, 300));
  assert.equal((JSON.parse(bodyOf(models)) as typeof TOO_LARGE_BODY).error.code, 'request_header_fields_too_large');
  assert.equal(models.closed, true);
  const unknown = await sendRaw(host, port, [`GET /nowhere HTTP/1.1\r\nhost: gw\r\n${pad}\r\n`], 5000);
  assert.equal(statusOf(unknown), 431, unknown.text.slice(0, 300));
  // A long query string counts: uWS routes on the path and would hand the query through.
  const query = await sendRaw(host, port, [`GET /healthz?${'q'.repeat(17 * 1024)} HTTP/1.1\r\nhost: gw\r\n\r\n`], 5000);
  assert.equal(statusOf(query), 431, query.text.slice(0, 300));
  const head = await sendRaw(host, port, [`HEAD /v1/models HTTP/1.1\r\nhost: gw\r\n${pad}\r\n`], 1000, true);
  assert.equal(statusOf(head), 431, head.text.slice(0, 300));
  assert.equal(bodyOf(head), '', 'the answer to HEAD has no body');
});

test('uWS closes a head still unfinished after 4 KiB without an answer, however far under the cap', async () => {
  // uWS's parser keeps at most 4 KiB of a head it has not seen the end of (HttpParser.h MAX_FALLBACK_SIZE,
  // compiled in). So a 5 KB head is served when it arrives in one read and closed when it does not.
  const r = await sendRaw(host, port, [`GET /healthz HTTP/1.1\r\nhost: gw\r\nx-pad: ${'p'.repeat(5 * 1024)}`], 5000, true);
  assert.equal(r.text, '');
  assert.equal(r.closed, true);
});

test('a 1 MB header line is closed before the client has sent it, and other clients keep being served', async () => {
  const total = 1024 * 1024;
  const step = 16 * 1024;
  // Paced so the gateway's reads keep up with the writes: the kernel's loopback buffers would otherwise take
  // the whole megabyte before the gateway looks. The gateway closes on its first read of the line.
  const outcome = await new Promise<{ sent: number; closed: boolean; text: string }>((resolve) => {
    const sock = connect(port, host);
    let sent = 0;
    let closed = false;
    let text = '';
    sock.on('data', (d) => { text += d.toString('latin1'); });
    sock.on('error', () => undefined);
    sock.on('close', () => { closed = true; });
    const chunk = 'a'.repeat(step);
    const pump = (): void => {
      if (closed || sent >= total) {
        sock.destroy();
        resolve({ sent, closed, text });
        return;
      }
      sock.write(chunk);
      sent += step;
      setTimeout(pump, 25);
    };
    sock.write(`GET /healthz HTTP/1.1\r\nhost: gw\r\nx-big: `, pump);
  });
  assert.equal(outcome.closed, true, 'the gateway closed the connection');
  assert.ok(outcome.sent < total, `closed after ${outcome.sent} of ${total} bytes were written`);
  assert.equal(outcome.text, '', 'no answer: uWS closes before any handler runs');
  const ok = await sendRaw(host, port, [chatOfHeadSize(1024)], 5000);
  assert.equal(statusOf(ok), 200, ok.text.slice(0, 300));
});

test('server.max_header_bytes sets the cap: at 2 KiB a 3 KB head is 431 and a 1.5 KB one served', async () => {
  const small = await startStack({ config: { server: { host: '127.0.0.1', port: 0, shutdown_grace_ms: 2000, max_header_bytes: 2048 } } });
  try {
    const u = new URL(small.url);
    const over = await sendRaw(u.hostname, Number(u.port), [chatOfHeadSize(3 * 1024)], 5000);
    assert.equal(statusOf(over), 431, over.text.slice(0, 300));
    const under = await sendRaw(u.hostname, Number(u.port), [chatOfHeadSize(1536)], 5000);
    assert.equal(statusOf(under), 200, under.text.slice(0, 300));
  } finally {
    await small.close();
  }
});
