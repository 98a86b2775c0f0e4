// End to end: a real gateway (uWS on port 0) in front of real mock replicas; a scripted run of a success, a
// 429, a client cancel and a retried request; then GET /metrics, as Prometheus would scrape it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { PROMTOOL_SKIP, promtoolCheck } from '../../helpers/promtool.ts';
import { createHash } from 'node:crypto';
import { ALPHA_KEY, TINY_KEY, startStack, waitFor, type TestStack } from '../../helpers/start-gateway.ts';
import { parseExposition, sumOf, valueOf, type Sample } from '../../unit/metrics/prom-text.ts';

let stack: TestStack;
const chat = (key: string, body: Record<string, unknown>, signal?: AbortSignal): Promise<Response> =>
  fetch(`${stack.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt-fast', messages: [{ role: 'user', content: 'hello there' }], ...body }),
    ...(signal ? { signal } : {}),
  });
const fault = (replica: string, body: Record<string, unknown>): Promise<Response> =>
  fetch(`${stack.replicas.get(replica)!.url}/_mock/faults`, { method: 'POST', body: JSON.stringify(body) });

async function scrape(): Promise<{ text: string; contentType: string | null; samples: Sample[] }> {
  const res = await fetch(`${stack.url}/metrics`);
  assert.equal(res.status, 200);
  const text = await res.text();
  return { text, contentType: res.headers.get('content-type'), samples: parseExposition(text) };
}

before(async () => {
  const sha = (k: string): string => createHash('sha256').update(k).digest('hex');
  stack = await startStack({
    config: {
      metrics: { tenant_labels: ['alpha'] },
      // The retry step needs identical prompts to reach both replicas: kv-aware would keep them on one.
      routing: { policy: 'least-outstanding-tokens' },
      // tiny: a 100-token bucket refilling at 1 token/s, so one request of 200 max_tokens is over quota
      tenants: [
        { name: 'alpha', api_keys: [{ sha256: sha(ALPHA_KEY) }], tokens_per_second: 1_000_000, burst_tokens: 10_000_000, max_inflight: 256, sla_tier: 'premium' },
        { name: 'tiny', api_keys: [{ sha256: sha(TINY_KEY) }], tokens_per_second: 1, burst_tokens: 100, max_inflight: 2 },
      ],
    },
  });
});

after(async () => {
  await stack.close();
});

void test('after a scripted run every counter and histogram on /metrics moved as it should', async (t) => {
  const before = (await scrape()).samples;
  const requests = (labels: Record<string, string>, s: Sample[]): number => sumOf(s, 'gateway_requests_total', labels);

  // 1. success, streamed to the end
  const ok = await chat(ALPHA_KEY, { stream: true, max_tokens: 8, stream_options: { include_usage: true } });
  assert.equal(ok.status, 200);
  await ok.text();

  // 2. 429: the tiny tenant's bucket holds 100 tokens; this request reserves more than that
  const limited = await chat(TINY_KEY, { max_tokens: 200 });
  assert.equal(limited.status, 429);
  await limited.text();

  // 3. the client hangs up mid-stream
  await fault('8b-1', { mode: 'slow', delay_ms: 30 });
  await fault('8b-2', { mode: 'slow', delay_ms: 30 });
  const ac = new AbortController();
  const streaming = await chat(ALPHA_KEY, { stream: true, max_tokens: 200, ignore_eos: true }, ac.signal);
  const reader = streaming.body!.getReader();
  await reader.read();
  ac.abort();
  await reader.read().catch(() => undefined);
  await waitFor(async () => sumOf((await scrape()).samples, 'gateway_client_cancellations_total') > 0, 5000, 20);

  // 4. retry: 8b-1 drops every completion connection, so whatever the router sends there is retried on 8b-2
  await fault('8b-1', { mode: 'refuse_connections' });
  await fault('8b-2', { mode: 'none' });
  let retried = 0;
  for (let i = 0; i < 6 && retried === 0; i++) {
    const r = await chat(ALPHA_KEY, { max_tokens: 4 });
    assert.equal(r.status, 200, 'the retry hides the failure from the client');
    await r.text();
    retried = sumOf((await scrape()).samples, 'gateway_retries_total') - sumOf(before, 'gateway_retries_total');
  }
  await fault('8b-1', { mode: 'none' });

  const { text, contentType, samples: s } = await scrape();
  assert.match(contentType ?? '', /^text\/plain; version=0\.0\.4/);
  const okAfter = requests({ route: 'chat', pool: '8b', status: '200', code: 'none' }, s);
  assert.ok(okAfter - requests({ route: 'chat', pool: '8b', status: '200', code: 'none' }, before) >= 2, 'success and retried success');
  assert.equal(requests({ status: '429', code: 'rate_limit_exceeded' }, s), 1);
  assert.equal(valueOf(s, 'gateway_quota_decisions_total', { result: 'rate_limit_exceeded' }), 1);
  assert.ok(valueOf(s, 'gateway_quota_decisions_total', { result: 'ok' })! >= 3);
  assert.ok(retried >= 1, 'a retry was counted');
  assert.ok(sumOf(s, 'gateway_upstream_errors_total') >= 1, 'the dropped connection was counted by kind');
  assert.equal(sumOf(s, 'gateway_client_cancellations_total', { route: 'chat', pool: '8b' }), 1);
  assert.equal(sumOf(s, 'gateway_cancellation_latency_seconds_count'), 1);
  assert.equal(requests({ route: 'chat', pool: '8b', status: '499', code: 'client_closed_request' }, s), 1);
  assert.ok(sumOf(s, 'gateway_ttft_seconds_count', { route: 'chat', pool: '8b', tier: 'premium' }) >= 2, 'both streams had a first token');
  assert.ok(sumOf(s, 'gateway_request_duration_seconds_count') >= 4);
  assert.ok(sumOf(s, 'gateway_overhead_seconds_count') >= 4);
  assert.ok(valueOf(s, 'gateway_tokens_total', { pool: '8b', tenant: 'alpha', kind: 'input' })! > 0);
  assert.ok(valueOf(s, 'gateway_tokens_total', { pool: '8b', tenant: 'alpha', kind: 'output' })! >= 8);
  assert.ok(sumOf(s, 'gateway_routing_decisions_total') >= 3);
  assert.equal(valueOf(s, 'gateway_replica_up', { replica: '8b-1' }), 1);
  assert.ok(valueOf(s, 'gateway_replica_table_staleness_seconds', { replica: '8b-2' })! < 5);
  // Counted in the poller thread, reported on the acceptor's page.
  assert.ok(sumOf(s, 'gateway_replica_scrapes_total', { result: 'ok' }) > 0, 'the poller thread\'s scrapes');
  assert.ok(sumOf(s, 'gateway_replica_scrape_duration_seconds_count') > 0);
  // From the kernel's socket tables: at least this scrape's own connection, none waiting to be accepted.
  assert.ok(valueOf(s, 'gateway_client_connections', { state: 'accepted' })! >= 1);
  assert.equal(valueOf(s, 'gateway_client_connections', { state: 'queued' }), 0);

  await t.test('promtool check metrics is clean', { skip: PROMTOOL_SKIP }, () => {
    assert.deepEqual(promtoolCheck(text), { status: 0, output: '' });
  });
});
