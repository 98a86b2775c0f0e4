// What an operator's Prometheus sees after a scripted run through the real gateway (src/gateway.ts wiring,
// uWS on port 0, two real mock replicas): one success, one 429 from the tiny tenant, one client cancel
// mid-stream, one retry caused by a replica failing before its first token. Every counter and histogram is
// checked by exact delta against the requests sent and the usage records written, then `promtool check
// metrics` must pass clean on the scraped page.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { PROMTOOL_SKIP, promtoolCheck } from '../../helpers/promtool.ts';
import { createHash } from 'node:crypto';
import { ALPHA_KEY, TINY_KEY, startStack, waitFor, type TestStack } from '../../helpers/start-gateway.ts';
import { openStream } from '../mock-replica/http-client.ts';
import { parseExposition, sumOf, valueOf, type Sample } from '../../unit/metrics/prom-text.ts';

let stack: TestStack;
const sha = (k: string): string => createHash('sha256').update(k).digest('hex');
const run = `ms${Date.now().toString(36)}`;

async function scrape(): Promise<{ text: string; samples: Sample[] }> {
  const res = await fetch(`${stack.url}/metrics`); // no key: /metrics is open
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /^text\/plain/);
  const text = await res.text();
  return { text, samples: parseExposition(text) };
}

async function fault(replica: string, spec: Record<string, unknown>): Promise<void> {
  const res = await fetch(`${stack.replicas.get(replica)!.url}/_mock/faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(spec) });
  assert.equal(res.status, 200);
}

function chat(key: string, id: string, body: Record<string, unknown>): Promise<Response> {
  return fetch(`${stack.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-request-id': id },
    body: JSON.stringify({ model: 'gpt-fast', messages: [{ role: 'user', content: 'hello there' }], ...body }),
  });
}

before(async () => {
  stack = await startStack({
    config: {
      routing: { policy: 'round-robin' },
      metrics: { tenant_labels: ['alpha', 'tiny'] },
      // data-plane failures must not take a replica out of rotation during the run
      registry: { scrape_interval_ms: 50, scrape_timeout_ms: 2000, down_after_failures: 50 },
      tenants: [
        { name: 'alpha', api_keys: [{ sha256: sha(ALPHA_KEY) }], tokens_per_second: 1_000_000, burst_tokens: 10_000_000, max_inflight: 256, sla_tier: 'premium' },
        // a 100-token bucket: any request reserving max_tokens 200 is refused
        { name: 'tiny', api_keys: [{ sha256: sha(TINY_KEY) }], tokens_per_second: 1, burst_tokens: 100, max_inflight: 2, sla_tier: 'batch' },
      ],
    },
  });
});

after(async () => {
  await stack.close();
});

test('after a success, a 429, a cancel and a retry, every gateway metric moved by exactly what happened', async (t) => {
  const base = (await scrape()).samples;
  const delta = (s: Sample[], name: string, labels: Record<string, string> = {}): number => sumOf(s, name, labels) - sumOf(base, name, labels);

  // 1. success: streamed to [DONE], usage chunk asked for
  const ok = await chat(ALPHA_KEY, `${run}-ok`, { stream: true, max_tokens: 8, ignore_eos: true, stream_options: { include_usage: true } });
  assert.equal(ok.status, 200);
  assert.ok((await ok.text()).endsWith('data: [DONE]\n\n'));

  // 2. 429 from the tiny tenant: prompt + 200 > its 100-token bucket
  const limited = await chat(TINY_KEY, `${run}-429`, { max_tokens: 200 });
  assert.equal(limited.status, 429);
  assert.equal(((await limited.json()) as { error: { code: string } }).error.code, 'rate_limit_exceeded');

  // 3. client cancel mid-stream (both replicas slowed so the stream is still running when we hang up)
  await fault('8b-1', { mode: 'slow', delay_ms: 40 });
  await fault('8b-2', { mode: 'slow', delay_ms: 40 });
  const s = openStream(stack.url, '/v1/chat/completions', { model: 'gpt-fast', messages: [{ role: 'user', content: 'a long story' }], max_tokens: 200, stream: true, ignore_eos: true },
    { authorization: `Bearer ${ALPHA_KEY}`, 'x-request-id': `${run}-cancel` });
  await s.waitFrames(3);
  s.destroy();
  await waitFor(async () => delta((await scrape()).samples, 'gateway_client_cancellations_total') === 1, 10_000, 50);
  await fault('8b-1', { mode: 'none' });
  await fault('8b-2', { mode: 'none' });

  // 4. retry: 8b-1 fails its next completion before the first token; round robin reaches it within two requests
  await fault('8b-1', { mode: 'error_before_first_token', status: 500, count: 1 });
  const retryIds: string[] = [];
  for (let i = 0; i < 2; i++) {
    const id = `${run}-retry-${i}`;
    retryIds.push(id);
    const res = await chat(ALPHA_KEY, id, { stream: true, max_tokens: 4, ignore_eos: true });
    assert.equal(res.status, 200, 'the retry hides the failure from the client');
    assert.ok((await res.text()).endsWith('data: [DONE]\n\n'));
    if ((await stack.usage()).some((r) => r.request_id === id && r.retries === 1)) break;
  }
  await fault('8b-1', { mode: 'none' });

  const recs = (await stack.usage()).filter((r) => r.request_id.startsWith(run));
  const byId = new Map(recs.map((r) => [r.request_id, r]));
  const cancel = byId.get(`${run}-cancel`)!;
  assert.ok(cancel, 'the cancel has a usage record');
  const retried = retryIds.map((id) => byId.get(id)!);
  assert.equal(retried.filter((r) => r.retries === 1).length, 1, 'exactly one request was retried');
  const alpha = recs.filter((r) => r.tenant === 'alpha');
  const successes = 1 + retried.length;

  const { text, samples: m } = await scrape();
  if (process.env.DUMP_METRICS) console.log(text, JSON.stringify(recs));

  // requests by status and code
  assert.equal(delta(m, 'gateway_requests_total', { route: 'chat', pool: '8b', status: '200', code: 'none' }), successes);
  assert.equal(delta(m, 'gateway_requests_total', { route: 'chat', pool: '8b', status: '429', code: 'rate_limit_exceeded' }), 1);
  assert.equal(delta(m, 'gateway_requests_total', { route: 'chat', pool: '8b', status: '499', code: 'client_closed_request' }), 1);
  assert.equal(delta(m, 'gateway_requests_total'), successes + 2, 'nothing else was counted');
  assert.equal(delta(m, 'gateway_requests_total', { route: 'completions' }), 0);

  // latency histograms: TTFT for every request that got a first token (not the 429), by the tenant's tier
  assert.equal(delta(m, 'gateway_ttft_seconds_count', { route: 'chat', pool: '8b', tier: 'premium' }), successes + 1);
  assert.equal(delta(m, 'gateway_ttft_seconds_count', { tier: 'batch' }), 0, 'the refused request had no first token');
  assert.ok(delta(m, 'gateway_ttft_seconds_sum') > 0);
  assert.equal(delta(m, 'gateway_ttft_seconds_bucket', { le: '+Inf' }), successes + 1, '+Inf bucket equals the count');
  assert.equal(delta(m, 'gateway_request_duration_seconds_count', { route: 'chat', pool: '8b' }), successes + 2);
  assert.equal(delta(m, 'gateway_overhead_seconds_count', { route: 'chat' }), successes + 2);
  assert.equal(delta(m, 'gateway_tpot_seconds_count', { pool: '8b' }), successes + 1, 'every stream with more than one token');

  // quota decisions
  assert.equal(delta(m, 'gateway_quota_decisions_total', { result: 'ok' }), successes + 1);
  assert.equal(delta(m, 'gateway_quota_decisions_total', { result: 'rate_limit_exceeded' }), 1);
  assert.equal(delta(m, 'gateway_quota_decisions_total', { result: 'concurrency_limit_exceeded' }), 0);

  // retries and the upstream error behind them
  assert.equal(delta(m, 'gateway_retries_total', { pool: '8b' }), 1);
  const retryKinds = m.filter((x) => x.name === 'gateway_retries_total' && x.value > 0).map((x) => x.labels.kind);
  assert.ok(retryKinds.every((k) => k === 'status_5xx' || k === 'upstream_error'), `retry kind ${retryKinds.join(',')}`);
  assert.equal(delta(m, 'gateway_upstream_errors_total', { kind: 'status_5xx' }), 1);
  assert.equal(delta(m, 'gateway_upstream_errors_total'), 1, 'the cancel is not an upstream error');

  // cancellations
  assert.equal(delta(m, 'gateway_client_cancellations_total', { route: 'chat', pool: '8b' }), 1);
  assert.equal(delta(m, 'gateway_cancellation_latency_seconds_count', { phase: 'streaming' }), 1);
  assert.equal(delta(m, 'gateway_cancellation_latency_seconds_count'), 1);

  // routing: one decision per attempt (the retried request made two), each to the replica in its record
  assert.equal(delta(m, 'gateway_routing_decisions_total', { policy: 'round-robin' }), successes + 1 + 1);
  assert.equal(delta(m, 'gateway_routing_decisions_total', { policy: 'round-robin', replica: '8b-1' }) +
    delta(m, 'gateway_routing_decisions_total', { policy: 'round-robin', replica: '8b-2' }), successes + 2);

  // tokens: the metric agrees with the usage records, tenant by tenant
  const sumRec = (k: 'input_tokens' | 'output_tokens' | 'cached_tokens'): number => alpha.reduce((n, r) => n + r[k], 0);
  assert.equal(delta(m, 'gateway_tokens_total', { pool: '8b', tenant: 'alpha', kind: 'output' }), sumRec('output_tokens'));
  assert.equal(delta(m, 'gateway_tokens_total', { pool: '8b', tenant: 'alpha', kind: 'input' }), sumRec('input_tokens'));
  assert.equal(delta(m, 'gateway_tokens_total', { pool: '8b', tenant: 'alpha', kind: 'cached' }), sumRec('cached_tokens'));
  assert.ok(sumRec('output_tokens') >= 8 + 4 * retried.length, `output ${sumRec('output_tokens')}`);
  assert.ok(cancel.output_tokens >= 2 && cancel.output_tokens < 200, `cancelled stream: tokens relayed before the hang-up, got ${cancel.output_tokens}`);
  assert.equal(delta(m, 'gateway_tokens_total', { tenant: 'other' }), 0, 'both tenants have their own label');

  // gauges that a dashboard reads
  assert.equal(valueOf(m, 'gateway_replica_up', { replica: '8b-1' }), 1);
  assert.equal(valueOf(m, 'gateway_replica_up', { replica: '8b-2' }), 1);

  await t.test('promtool check metrics reports nothing', { skip: PROMTOOL_SKIP }, () => {
    assert.deepEqual(promtoolCheck(text), { status: 0, output: '' });
  });
});
