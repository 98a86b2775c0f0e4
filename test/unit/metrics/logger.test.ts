// Tests for src/logging/logger.ts (kept under test/unit/metrics/, the observability engineer's test folder).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createLogger, redactSecrets, requestLogLine, type RequestLogFields } from '../../../src/logging/logger.ts';

function capture(level: Parameters<typeof createLogger>[0]) {
  const lines: string[] = [];
  const logger = createLogger(level, { destination: { write: (s: string) => void lines.push(s) } });
  return { logger, lines, records: () => lines.map((l) => JSON.parse(l) as Record<string, unknown>) };
}

const fields: RequestLogFields = {
  requestId: 'req-1', route: 'chat', tenant: 'alpha', model: 'gpt-fast', pool: '8b', replica: '8b-2',
  status: 200, code: null, stream: true, durationMs: 1234.56789, ttftMs: 41.2, queueMs: 0,
  inputTokens: 1800, outputTokens: 300, cachedTokens: 1504, retries: 0, cancelled: false, finishReason: 'stop',
};

void test('one json line per request with the outcome fields and no error code on success', () => {
  const { logger, lines, records } = capture('info');
  requestLogLine(logger, fields);
  assert.equal(lines.length, 1);
  assert.ok(lines[0]!.endsWith('\n') && !lines[0]!.slice(0, -1).includes('\n'));
  const r = records()[0]!;
  assert.equal(r.level, 'info');
  assert.equal(r.msg, 'request');
  assert.equal(typeof r.time, 'string');
  assert.deepEqual(
    { id: r.request_id, tenant: r.tenant, replica: r.replica, status: r.status, code: r.code, ms: r.duration_ms, ttft: r.ttft_ms, out: r.output_tokens, fin: r.finish_reason },
    { id: 'req-1', tenant: 'alpha', replica: '8b-2', status: 200, code: null, ms: 1234.568, ttft: 41.2, out: 300, fin: 'stop' },
  );
});

void test('an error outcome carries its code, and 5xx lines are warnings', () => {
  const { logger, records } = capture('info');
  requestLogLine(logger, { ...fields, status: 429, code: 'rate_limit_exceeded', ttftMs: null, outputTokens: 0 });
  requestLogLine(logger, { ...fields, status: 502, code: 'upstream_unavailable', retries: 2 });
  requestLogLine(logger, { ...fields, status: 500, code: 'internal_error' });
  const [a, b, c] = records();
  assert.deepEqual([a!.level, a!.code, a!.ttft_ms], ['info', 'rate_limit_exceeded', null]);
  assert.deepEqual([b!.level, b!.code, b!.retries], ['warn', 'upstream_unavailable', 2]);
  assert.deepEqual([c!.level, c!.code], ['error', 'internal_error']);
});

void test('an authorization header passed by mistake is redacted, with prompts and completions', () => {
  const { logger, lines } = capture('info');
  logger.info({
    headers: { authorization: 'Bearer sk-demo-alpha', 'x-api-key': 'sk-demo-tiny', 'content-type': 'application/json' },
    Authorization: 'Bearer sk-top-level',
    req: { headers: { Authorization: 'Bearer sk-nested' }, body: '{"messages":[{"role":"user","content":"secret prompt"}]}' },
    messages: [{ role: 'user', content: 'secret prompt' }],
    prompt: 'secret prompt',
    choices: [{ message: { content: 'secret completion' } }],
  }, 'handler logged too much');
  const out = lines.join('');
  for (const secret of ['sk-demo-alpha', 'sk-demo-tiny', 'sk-top-level', 'sk-nested', 'secret prompt', 'secret completion']) {
    assert.ok(!out.includes(secret), `${secret} leaked: ${out}`);
  }
  const r = JSON.parse(lines[0]!) as { headers: Record<string, string> };
  assert.equal(r.headers.authorization, '[redacted]');
  assert.equal(r.headers['content-type'], 'application/json', 'harmless headers stay');
});

void test('a request line has a fixed shape, so nothing outside its fields can reach the log', () => {
  const { logger, records } = capture('info');
  const sneaky = { ...fields, authorization: 'Bearer sk-demo-alpha', prompt: 'hello' } as RequestLogFields;
  requestLogLine(logger, sneaky);
  const r = records()[0]!;
  assert.equal('authorization' in r || 'prompt' in r, false);
  assert.ok(!JSON.stringify(r).includes('sk-demo-alpha'));
});

void test('disabled levels write nothing', () => {
  const { logger, lines } = capture('warn');
  requestLogLine(logger, fields);
  logger.debug({ x: 1 }, 'debug');
  assert.equal(lines.length, 0);
  requestLogLine(logger, { ...fields, status: 503, code: 'no_healthy_replica' });
  assert.equal(lines.length, 1);
});

void test('redaction copies instead of mutating, ignores header case and leaves clean objects untouched', () => {
  const headers = { AUTHORIZATION: 'Bearer sk-x', accept: '*/*' };
  const input = { request: { headers }, list: [{ Cookie: 'c=1' }, 'plain'] };
  const out = redactSecrets(input) as { request: { headers: Record<string, string> }; list: [Record<string, string>, string] };
  assert.equal(out.request.headers.AUTHORIZATION, '[redacted]');
  assert.equal(out.request.headers.accept, '*/*');
  assert.equal(out.list[0].Cookie, '[redacted]');
  assert.equal(headers.AUTHORIZATION, 'Bearer sk-x', "the caller's object is not mutated");
  const clean = { a: 1, b: { c: [1, 2] } };
  assert.equal(redactSecrets(clean), clean, 'no copy when there is nothing to redact');
});
