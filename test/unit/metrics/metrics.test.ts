import { test } from 'node:test';
import assert from 'node:assert/strict';
import { GatewayMetrics } from '../../../src/metrics/metrics.ts';
import { labelValues, parseExposition, sumOf, valueOf } from './prom-text.ts';
import { base, metricsTestConfig, scriptedRun } from './scripted-run.ts';

void test('a scripted run moves each counter and histogram by what happened', async (t) => {
  const m = new GatewayMetrics(metricsTestConfig());
  t.after(() => m.close());
  scriptedRun(m);
  const s = parseExposition(await m.render());

  assert.equal(valueOf(s, 'gateway_requests_total', { route: 'chat', pool: '8b', status: '200', code: 'none' }), 2);
  assert.equal(valueOf(s, 'gateway_requests_total', { route: 'chat', pool: '8b', status: '429', code: 'rate_limit_exceeded' }), 1);
  assert.equal(valueOf(s, 'gateway_requests_total', { route: 'completions', pool: '70b', status: '200', code: 'none' }), 1);
  assert.equal(sumOf(s, 'gateway_requests_total'), 4);

  assert.equal(valueOf(s, 'gateway_quota_decisions_total', { result: 'ok' }), 3);
  assert.equal(valueOf(s, 'gateway_quota_decisions_total', { result: 'rate_limit_exceeded' }), 1);
  assert.equal(valueOf(s, 'gateway_quota_decisions_total', { result: 'concurrency_limit_exceeded' }), 0);
  assert.equal(valueOf(s, 'gateway_admission_decisions_total', { pool: '8b', result: 'admitted' }), 1);
  assert.equal(valueOf(s, 'gateway_admission_decisions_total', { pool: '8b', result: 'queued' }), 1);
  assert.equal(valueOf(s, 'gateway_admission_decisions_total', { pool: '8b', result: 'shed' }), 0);
  assert.equal(valueOf(s, 'gateway_routing_decisions_total', { policy: 'kv-aware', replica: '70b-1' }), 2);
  assert.equal(valueOf(s, 'gateway_routing_decisions_total', { policy: 'kv-aware', replica: '8b-2' }), 1);
  assert.equal(valueOf(s, 'gateway_retries_total', { pool: '70b', kind: 'connect' }), 1);
  assert.equal(valueOf(s, 'gateway_upstream_errors_total', { kind: 'connect' }), 1);
  assert.equal(valueOf(s, 'gateway_upstream_errors_total', { kind: 'mid_stream' }), 0);
  assert.equal(valueOf(s, 'gateway_client_cancellations_total', { route: 'chat', pool: '8b' }), 1);
  assert.equal(valueOf(s, 'gateway_cancellation_latency_seconds_count', { phase: 'streaming' }), 1);
  assert.equal(valueOf(s, 'gateway_cancellation_latency_seconds_bucket', { phase: 'streaming', le: '0.0005' }), 0);
  assert.equal(valueOf(s, 'gateway_cancellation_latency_seconds_bucket', { phase: 'streaming', le: '0.001' }), 1);

  // TTFT: premium tenant alpha; 0.12 s and 0.25 s on chat/8b, 0.4 s (exactly the SLA bound) on completions/70b
  const chatTtft = { route: 'chat', pool: '8b', tier: 'premium' };
  assert.equal(valueOf(s, 'gateway_ttft_seconds_count', chatTtft), 2);
  assert.equal(valueOf(s, 'gateway_ttft_seconds_bucket', { ...chatTtft, le: '0.18' }), 1);
  assert.equal(valueOf(s, 'gateway_ttft_seconds_bucket', { ...chatTtft, le: '0.4' }), 2);
  assert.equal(valueOf(s, 'gateway_ttft_seconds_bucket', { route: 'completions', pool: '70b', tier: 'premium', le: '0.4' }), 1);
  assert.equal(sumOf(s, 'gateway_ttft_seconds_count'), 3, 'the 429 has no first token');
  assert.equal(valueOf(s, 'gateway_tpot_seconds_count', { pool: '8b' }), 2);
  assert.equal(valueOf(s, 'gateway_tpot_seconds_bucket', { pool: '8b', le: '0.025' }), 1);
  assert.equal(valueOf(s, 'gateway_request_duration_seconds_count', { route: 'chat', pool: '8b' }), 3);

  // overhead = duration − upstream − queue: 5 ms, 2 ms (the 429), 4 ms, 4 ms
  assert.equal(valueOf(s, 'gateway_overhead_seconds_count', { route: 'chat' }), 3);
  assert.ok(Math.abs(valueOf(s, 'gateway_overhead_seconds_sum', { route: 'chat' })! - 0.011) < 1e-9);
  assert.equal(valueOf(s, 'gateway_overhead_seconds_bucket', { route: 'chat', le: '0.003' }), 1);
  assert.equal(valueOf(s, 'gateway_overhead_seconds_bucket', { route: 'chat', le: '0.005' }), 3);
  // queue wait observed for requests that reached a replica (3), not for the 429
  assert.equal(sumOf(s, 'gateway_queue_wait_seconds_count'), 3);
  assert.equal(valueOf(s, 'gateway_queue_wait_seconds_bucket', { pool: '8b', le: '0.05' }), 2);
  assert.equal(valueOf(s, 'gateway_queue_wait_seconds_bucket', { pool: '8b', le: '0.025' }), 1);

  assert.equal(valueOf(s, 'gateway_tokens_total', { pool: '8b', tenant: 'alpha', kind: 'input' }), 3600);
  assert.equal(valueOf(s, 'gateway_tokens_total', { pool: '8b', tenant: 'alpha', kind: 'output' }), 340);
  assert.equal(valueOf(s, 'gateway_tokens_total', { pool: '8b', tenant: 'alpha', kind: 'cached' }), 1500);
  assert.equal(valueOf(s, 'gateway_tokens_total', { pool: '70b', tenant: 'alpha', kind: 'output' }), 20);
});

void test('scrape-time sources are read on render and unknown replicas collapse to other', async (t) => {
  const m = new GatewayMetrics(metricsTestConfig());
  t.after(() => m.close());
  let inflight = 7;
  m.setSources({
    inflight: () => inflight,
    tokenizerQueueDepth: () => 2,
    replicaUp: () => [['8b-1', 1], ['8b-2', 0], ['ghost-1', 1], ['ghost-2', 0]],
    replicaStalenessSeconds: () => [['8b-1', 0.1], ['ghost-1', 4], ['ghost-2', 9]],
    kvOccupancy: () => [['8b', 0.62], ['70b', 0.81]],
  });
  let s = parseExposition(await m.render());
  assert.equal(valueOf(s, 'gateway_inflight_requests'), 7);
  assert.equal(valueOf(s, 'gateway_tokenizer_queue_depth'), 2);
  assert.equal(valueOf(s, 'gateway_replica_up', { replica: '8b-2' }), 0);
  assert.equal(valueOf(s, 'gateway_replica_up', { replica: 'other' }), 0, 'worst of the unknown replicas');
  assert.equal(valueOf(s, 'gateway_replica_table_staleness_seconds', { replica: 'other' }), 9);
  assert.equal(valueOf(s, 'gateway_pool_kv_occupancy_ratio', { pool: '70b' }), 0.81);
  assert.ok(valueOf(s, 'gateway_event_loop_delay_max_seconds')! >= 0);
  assert.ok(valueOf(s, 'gateway_process_cpu_seconds_total')! > 0, 'default process metrics carry the gateway_ prefix');
  inflight = 0;
  m.setSources({ kvOccupancy: () => [['8b', 0.5]] });
  s = parseExposition(await m.render());
  assert.equal(valueOf(s, 'gateway_inflight_requests'), 0, 'earlier sources stay when others are replaced');
  assert.equal(valueOf(s, 'gateway_pool_kv_occupancy_ratio', { pool: '70b' }), undefined, 'gauges are rebuilt per scrape');
});

void test('tenant labels are bounded to the configured names and every label stays in its closed set', async (t) => {
  const m = new GatewayMetrics(metricsTestConfig());
  t.after(() => m.close());
  m.requestEnded(base);
  for (let i = 0; i < 500; i++) {
    m.requestEnded({ ...base, tenant: `tenant-${i}`, pool: i % 2 ? `pool-${i}` : '8b', code: i % 3 ? `weird_${i}` : null, status: 400 + (i % 5) });
    m.routed(`policy-${i}`, `replica-${i}`);
    m.retry('8b', `kind-${i}`);
  }
  m.requestEnded({ ...base, tenant: null, status: 401, code: 'invalid_api_key', pool: null, inputTokens: 0, outputTokens: 0, cachedTokens: 0 });
  const s = parseExposition(await m.render());
  assert.deepEqual([...labelValues(s, 'gateway_tokens_total', 'tenant')].sort(), ['alpha', 'other']);
  assert.deepEqual([...labelValues(s, 'gateway_requests_total', 'pool')].sort(), ['70b', '8b', 'none', 'other']);
  assert.deepEqual([...labelValues(s, 'gateway_requests_total', 'code')].sort(), ['invalid_api_key', 'none', 'other']);
  assert.deepEqual([...labelValues(s, 'gateway_ttft_seconds', 'tier')], ['premium', 'none'], 'unknown tenants have no tier');
  assert.ok(labelValues(s, 'gateway_routing_decisions_total', 'policy').size <= 17, 'policy names are capped');
  m.retry('8b', 'upstream_unavailable');
  const s2 = parseExposition(await m.render());
  assert.deepEqual([...labelValues(s2, 'gateway_retries_total', 'kind')].sort(), ['other', 'upstream_unavailable'], 'kinds or error codes, else other');
  assert.ok(labelValues(s, 'gateway_routing_decisions_total', 'replica').size <= 4);
  assert.ok(s.length < 2000, `series count stays bounded (${s.length})`);
});

void test('a config reload gives new pools and tenants their own labels and keeps existing counts', async (t) => {
  const cfg = metricsTestConfig();
  const m = new GatewayMetrics(cfg);
  t.after(() => m.close());
  m.requestEnded({ ...base, pool: 'lora', tenant: 'gamma' });
  m.reconfigure({
    ...cfg,
    pools: [...cfg.pools, { ...cfg.pools[0]!, id: 'lora', model: 'llama-3.1-8b-lora', replicas: [{ ...cfg.pools[0]!.replicas[0]!, id: 'lora-1' }] }],
    metrics: { tenant_labels: ['alpha', 'gamma'] },
  });
  m.requestEnded({ ...base, pool: 'lora', tenant: 'gamma' });
  m.routed('round-robin', 'lora-1');
  const s = parseExposition(await m.render());
  assert.equal(valueOf(s, 'gateway_requests_total', { route: 'chat', pool: 'other', status: '200' }), 1, 'before the reload');
  assert.equal(valueOf(s, 'gateway_requests_total', { route: 'chat', pool: 'lora', status: '200' }), 1, 'after the reload');
  assert.equal(valueOf(s, 'gateway_tokens_total', { pool: 'lora', tenant: 'gamma', kind: 'input' }), 1800);
  assert.equal(valueOf(s, 'gateway_routing_decisions_total', { policy: 'round-robin', replica: 'lora-1' }), 1);
});

void test('a throwing gauge source empties that gauge and the rest of the page is still served', async (t) => {
  const m = new GatewayMetrics(metricsTestConfig());
  t.after(() => m.close());
  m.setSources({
    inflight: () => { throw new Error('boom'); },
    replicaUp: function* () { yield ['8b-1', 1]; throw new Error('boom'); },
    tokenizerQueueDepth: () => 4,
  });
  const s = parseExposition(await m.render());
  assert.ok(Number.isNaN(valueOf(s, 'gateway_inflight_requests')), 'unknown, not a plausible 0');
  assert.equal(valueOf(s, 'gateway_replica_up', { replica: '8b-1' }), undefined);
  assert.equal(valueOf(s, 'gateway_tokenizer_queue_depth'), 4);
});

void test('ttft separates prompts inside the sla scope (up to 4,000 tokens) from longer ones', async (t) => {
  const m = new GatewayMetrics(metricsTestConfig());
  t.after(() => m.close());
  m.requestEnded({ ...base, inputTokens: 4000, ttftSeconds: 0.2 });
  m.requestEnded({ ...base, inputTokens: 4001, ttftSeconds: 1.5 });
  const s = parseExposition(await m.render());
  assert.equal(valueOf(s, 'gateway_ttft_seconds_count', { route: 'chat', pool: '8b', tier: 'premium', prompt: 'short' }), 1);
  assert.equal(valueOf(s, 'gateway_ttft_seconds_sum', { route: 'chat', pool: '8b', tier: 'premium', prompt: 'long' }), 1.5);
});
