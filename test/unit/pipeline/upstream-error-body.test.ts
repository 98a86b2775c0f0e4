// normaliseUpstreamError, table-driven: vLLM's nested body (v0.10.1+), its older flat body, other servers'
// shapes and non-JSON bodies, each to the status, type and string code the client sees on the wire.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { normaliseUpstreamError } from '../../../src/pipeline/upstream-error-body.ts';
import { errorBody } from '../../../src/errors/openai-error-body.ts';
import { statusOf } from '../../../src/errors/rejection.ts';

interface Wire { status: number; type: string; code: string; message: string }

function onWire(status: number, body: string | Buffer): Wire {
  const r = normaliseUpstreamError(status, typeof body === 'string' ? Buffer.from(body) : body);
  const env = JSON.parse(errorBody(r)) as { error: { message: string; type: string; param: unknown; code: unknown } };
  assert.equal(typeof env.error.code, 'string', 'code on the wire is always a string');
  assert.ok('param' in env.error);
  return { status: statusOf(r), type: env.error.type, code: env.error.code as string, message: env.error.message };
}

const CTX_MSG = "This model's maximum context length is 2048 tokens. However, your request has 3002 input tokens. Please reduce the length of the input messages.";

// [title, replica status, replica body, expected wire figures (message: exact string or RegExp)]
const CASES: Array<[string, number, string, Omit<Wire, 'message'> & { message: string | RegExp }]> = [
  ['vLLM nested 400 context length', 400, JSON.stringify({ error: { message: CTX_MSG, type: 'BadRequestError', param: null, code: 400 } }),
    { status: 400, type: 'invalid_request_error', code: 'context_length_exceeded', message: CTX_MSG }],
  ['vLLM nested 404 unknown model', 404, JSON.stringify({ error: { message: 'The model `nope` does not exist.', type: 'NotFoundError', param: null, code: 404 } }),
    { status: 404, type: 'invalid_request_error', code: 'model_not_found', message: 'The model `nope` does not exist.' }],
  ['vLLM nested 400 other', 400, JSON.stringify({ error: { message: 'temperature must be non-negative', type: 'BadRequestError', param: null, code: 400 } }),
    { status: 400, type: 'invalid_request_error', code: 'upstream_bad_request', message: 'temperature must be non-negative' }],
  ['vLLM flat (pre 0.10.1) 400 context length', 400, JSON.stringify({ object: 'error', message: CTX_MSG, type: 'BadRequestError', param: null, code: 400 }),
    { status: 400, type: 'invalid_request_error', code: 'context_length_exceeded', message: CTX_MSG }],
  ['vLLM flat 404', 404, JSON.stringify({ object: 'error', message: 'The model `x` does not exist.', type: 'NotFoundError', param: null, code: 404 }),
    { status: 404, type: 'invalid_request_error', code: 'model_not_found', message: 'The model `x` does not exist.' }],
  ['a string code is kept', 400, JSON.stringify({ error: { message: 'bad', type: 'invalid_request_error', code: 'some_code' } }),
    { status: 400, type: 'invalid_request_error', code: 'some_code', message: 'bad' }],
  ['403 is a permission_error', 403, JSON.stringify({ error: { message: 'forbidden', code: 403 } }),
    { status: 403, type: 'permission_error', code: 'upstream_bad_request', message: 'forbidden' }],
  ['422 validation error (FastAPI detail string)', 422, JSON.stringify({ detail: 'Unprocessable' }),
    { status: 422, type: 'invalid_request_error', code: 'upstream_bad_request', message: 'Unprocessable' }],
  ['error as a plain string', 400, JSON.stringify({ error: 'something broke' }),
    { status: 400, type: 'invalid_request_error', code: 'upstream_bad_request', message: 'something broke' }],
  ['non-JSON 400', 400, 'Bad Request',
    { status: 400, type: 'invalid_request_error', code: 'upstream_bad_request', message: 'Bad Request' }],
  ['non-JSON 404 from a proxy', 404, '<html>404 Not Found</html>',
    { status: 404, type: 'invalid_request_error', code: 'model_not_found', message: '<html>404 Not Found</html>' }],
  ['empty 400 body', 400, '',
    { status: 400, type: 'invalid_request_error', code: 'upstream_bad_request', message: 'The replica answered with status 400.' }],
  ['vLLM nested 500', 500, JSON.stringify({ error: { message: 'EngineCore died', type: 'InternalServerError', param: null, code: 500 } }),
    { status: 502, type: 'server_error', code: 'upstream_error', message: 'EngineCore died' }],
  ['non-JSON 503', 503, 'Service Unavailable\n',
    { status: 502, type: 'server_error', code: 'upstream_error', message: 'Service Unavailable' }],
  ['empty 500', 500, '',
    { status: 502, type: 'server_error', code: 'upstream_error', message: 'The replica answered with status 500.' }],
  ['JSON without a message', 400, JSON.stringify({ error: { code: 400 } }),
    { status: 400, type: 'invalid_request_error', code: 'upstream_bad_request', message: 'The replica answered with status 400.' }],
];

for (const [title, status, body, want] of CASES) {
  test(`${title}: ${status} becomes ${want.status} ${want.code}`, () => {
    const got = onWire(status, body);
    assert.equal(got.status, want.status);
    assert.equal(got.type, want.type);
    assert.equal(got.code, want.code);
    if (typeof want.message === 'string') assert.equal(got.message, want.message);
    else assert.match(got.message, want.message);
  });
}

test('a long non-JSON body is cut to its first 200 characters', () => {
  const got = onWire(400, 'x'.repeat(5000));
  assert.equal(got.message, 'x'.repeat(200));
});

test('every vLLM error body in the SSE fixtures keeps its message and gets a string code', () => {
  const lines = readFileSync(new URL('../../fixtures/sse/errors.txt', import.meta.url), 'utf8').split('\n').filter(Boolean);
  assert.ok(lines.length >= 3);
  for (const line of lines) {
    const parsed = JSON.parse(line) as { error: { message: string; code: number } };
    const got = onWire(parsed.error.code, line);
    assert.equal(got.message, parsed.error.message);
    assert.equal(got.status, parsed.error.code);
    assert.notEqual(got.code, String(parsed.error.code), 'the numeric code is never echoed');
  }
});
