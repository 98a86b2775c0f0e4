// The one log line per request, as the running gateway writes it: the fields of RequestLogFields (stream,
// queue, finish reason included), `info` for a success or the client's own 4xx, `warn` for a 5xx the
// fleet caused, and no prompt text in it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createLogger } from '../../../src/logging/logger.ts';
import { ALPHA_KEY, startStack, waitFor, type TestStack } from '../../helpers/start-gateway.ts';

const lines: string[] = [];
let stack: TestStack;

before(async () => {
  stack = await startStack({
    logger: createLogger('info', { destination: { write: (s: string) => void lines.push(s) } }),
    config: { upstream: { connect_timeout_ms: 1000, first_token_timeout_ms: 5000, max_attempts: 2 } },
  });
});

after(async () => {
  await stack.close();
});

async function post(id: string, body: Record<string, unknown>): Promise<number> {
  const res = await fetch(`${stack.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ALPHA_KEY}`, 'content-type': 'application/json', 'x-request-id': id },
    body: JSON.stringify(body),
  });
  await res.arrayBuffer();
  return res.status;
}

async function lineOf(id: string): Promise<Record<string, unknown>> {
  return waitFor(() => lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((r) => r.msg === 'request' && r.request_id === id));
}

test('a streamed success is one info line with the stream, queue and finish fields', async () => {
  assert.equal(await post('log-ok', { model: 'gpt-fast', messages: [{ role: 'user', content: 'secret prompt text' }], max_tokens: 3, stream: true }), 200);
  const r = await lineOf('log-ok');
  assert.equal(r.level, 'info');
  assert.deepEqual(
    { route: r.route, tenant: r.tenant, model: r.model, pool: r.pool, status: r.status, code: r.code, stream: r.stream, out: r.output_tokens, fin: r.finish_reason, retries: r.retries, cancelled: r.cancelled },
    { route: 'chat', tenant: 'alpha', model: 'gpt-fast', pool: '8b', status: 200, code: null, stream: true, out: 3, fin: 'length', retries: 0, cancelled: false },
  );
  for (const k of ['duration_ms', 'ttft_ms', 'queue_ms', 'input_tokens', 'cached_tokens']) assert.equal(typeof r[k], 'number', k);
  assert.match(String(r.replica), /^8b-[12]$/);
  assert.ok(!lines.join('').includes('secret prompt text'));
});

test("the client's own 4xx is info, a 5xx from the fleet is warn", async () => {
  assert.equal(await post('log-404', { model: 'no-such-model', messages: [{ role: 'user', content: 'x' }] }), 404);
  const notFound = await lineOf('log-404');
  assert.deepEqual([notFound.level, notFound.status, notFound.code, notFound.stream], ['info', 404, 'model_not_found', false]);
  for (const r of stack.replicas.values()) {
    const res = await fetch(`${r.url}/_mock/faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ mode: 'error_before_first_token', status: 500 }) });
    assert.equal(res.status, 200);
  }
  try {
    const status = await post('log-5xx', { model: 'gpt-fast', messages: [{ role: 'user', content: 'x' }], max_tokens: 2 });
    assert.ok(status >= 500, `status ${status}`);
    const failed = await lineOf('log-5xx');
    assert.deepEqual([failed.level, failed.status, failed.retries], ['warn', status, 1]);
  } finally {
    for (const r of stack.replicas.values()) {
      await fetch(`${r.url}/_mock/faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ mode: 'none' }) });
    }
  }
});
