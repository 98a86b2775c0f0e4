// Streams still running when the shutdown grace period ends are the gateway's doing, not a replica's: each
// ends with one `shutting_down` error event (never [DONE], never upstream_error), is counted as a 503
// shutting_down request (gateway_requests_total) and not as an upstream error (gateway_upstream_errors_total),
// and its usage record says status 503, cancelled false, finish_reason null, with the tokens relayed before the
// cut. Real gateway, real mock replicas slowed so the streams outlive a 300 ms grace period. The metrics are
// read from the calls the gateway makes on its real GatewayMetrics (its page cannot be rendered once the
// gateway has closed, and the cut happens inside close()).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { ALPHA_KEY, startStack, type TestStack } from '../../helpers/start-gateway.ts';
import { openStream, setFault } from '../mock-replica/http-client.ts';
import type { UsageRecord } from '../../../src/usage/usage-record.ts';

let stack: TestStack | null = null;

after(async () => {
  await stack?.close();
});

test('streams cut at the end of the grace period end with a shutting_down event, count as drained, and are recorded as 503', async () => {
  stack = await startStack();
  for (const r of stack.replicas.values()) await setFault(r.url, { mode: 'slow', delay_ms: 100 }); // 30 tokens: ~3 s
  const streams = [0, 1].map((i) => openStream(stack!.url, '/v1/chat/completions',
    { model: 'gpt-fast', messages: [{ role: 'user', content: `long ${i}` }], max_tokens: 30, ignore_eos: true, stream: true },
    { authorization: `Bearer ${ALPHA_KEY}`, 'x-request-id': `cut-${i}` }));
  await Promise.all(streams.map((s) => s.waitFrames(2)));
  const metrics = stack.gateway.metrics;
  const ended: Array<{ status: number; code: string | null }> = [];
  const upstreamErrors: string[] = [];
  const requestEnded = metrics.requestEnded.bind(metrics);
  const upstreamError = metrics.upstreamError.bind(metrics);
  metrics.requestEnded = (r) => {
    ended.push({ status: r.status, code: r.code });
    requestEnded(r);
  };
  metrics.upstreamError = (kind) => {
    upstreamErrors.push(kind);
    upstreamError(kind);
  };
  await stack.gateway.close(300);

  for (const [i, s] of streams.entries()) {
    const { text } = await s.done;
    assert.equal((await s.head).statusCode, 200);
    const frames = text.split('\n\n').filter(Boolean);
    const errors = frames.filter((f) => f.startsWith('data: {"error"'));
    assert.equal(errors.length, 1, `stream ${i}: one error event`);
    assert.equal(frames.at(-1), errors[0], `stream ${i}: the error event is the last frame`);
    assert.ok(!text.includes('[DONE]'), `stream ${i}: never disguised as complete`);
    const err = (JSON.parse(errors[0]!.slice('data: '.length)) as { error: { code: string; type: string; message: string } }).error;
    assert.equal(err.code, 'shutting_down', `stream ${i}: ${errors[0]}`);
    assert.equal(err.type, 'service_unavailable_error');
    assert.match(err.message, /shutting down/);
  }

  assert.deepEqual(ended, [{ status: 503, code: 'shutting_down' }, { status: 503, code: 'shutting_down' }], 'both counted as drained');
  assert.deepEqual(upstreamErrors, [], 'no upstream error counted');

  const recs = readFileSync(stack.usagePath, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as UsageRecord).filter((r) => r.request_id.startsWith('cut-'));
  assert.deepEqual(recs.map((r) => r.request_id).sort(), ['cut-0', 'cut-1']);
  for (const r of recs) {
    assert.equal(r.status, 503);
    assert.equal(r.cancelled, false);
    assert.equal(r.finish_reason, null);
    assert.ok(r.output_tokens >= 1 && r.output_tokens < 30, `tokens relayed before the cut: ${r.output_tokens}`);
    assert.ok(r.ttft_ms !== null);
  }
});
