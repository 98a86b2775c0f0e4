// Test helper: a small two-pool config and the acceptance criteria's scripted run (success, 429, cancel,
// retry) recorded straight on a GatewayMetrics. Thread: test process.
import { parseConfig } from '../../../src/config/load.ts';
import type { GatewayMetrics, RequestOutcome } from '../../../src/metrics/metrics.ts';

const KEY = { sha256: 'a'.repeat(64) };
export const metricsTestConfig = () => parseConfig({
  pools: [
    { id: '8b', model: 'llama-3.1-8b-instruct', replicas: [{ id: '8b-1', url: 'http://127.0.0.1:1' }, { id: '8b-2', url: 'http://127.0.0.1:2' }] },
    { id: '70b', model: 'llama-3.1-70b-instruct', replicas: [{ id: '70b-1', url: 'http://127.0.0.1:3' }] },
  ],
  tenants: [
    { name: 'alpha', api_keys: [KEY], tokens_per_second: 1, burst_tokens: 1, max_inflight: 1, sla_tier: 'premium' },
    { name: 'beta', api_keys: [{ sha256: 'b'.repeat(64) }], tokens_per_second: 1, burst_tokens: 1, max_inflight: 1, sla_tier: 'batch' },
  ],
  routing: { policy: 'round-robin' },
  metrics: { tenant_labels: ['alpha'] },
});

export const base: RequestOutcome = {
  route: 'chat', pool: '8b', tenant: 'alpha', status: 200, code: null, stream: true,
  ttftSeconds: 0.12, durationSeconds: 3, upstreamSeconds: 2.995, queueSeconds: 0,
  inputTokens: 1800, outputTokens: 300, cachedTokens: 1500,
  retries: 0, cancelled: false, tpotSeconds: 0.024,
};

/** The scripted run of the acceptance criteria: a success, a 429, a cancel and a retried success. */
export function scriptedRun(m: GatewayMetrics): void {
  // 1. success, streamed, fully cached prefix predicted
  m.quota('ok');
  m.admission('8b', 'admitted');
  m.routed('kv-aware', '8b-1', 'prefix');
  m.requestEnded({ ...base, predictedCachedTokens: base.cachedTokens, replica: '8b-1' });
  // 2. 429: quota rejects before admission, no pool work, no tokens
  m.quota('rate_limit_exceeded');
  m.requestEnded({
    ...base, tenant: 'beta', status: 429, code: 'rate_limit_exceeded', ttftSeconds: null, tpotSeconds: null,
    durationSeconds: 0.002, upstreamSeconds: 0, inputTokens: 0, outputTokens: 0, cachedTokens: 0,
  });
  // 3. cancel mid-stream after 40 tokens: queued 50 ms first
  m.quota('ok');
  m.admission('8b', 'queued');
  m.routed('kv-aware', '8b-2', 'cold');
  m.cancelled('streaming', 0.0008);
  m.requestEnded({
    ...base, status: 200, cancelled: true, durationSeconds: 1.5, upstreamSeconds: 1.446, queueSeconds: 0.05,
    outputTokens: 40, cachedTokens: 0, ttftSeconds: 0.25, tpotSeconds: 0.03,
  });
  // 4. retry: first attempt refused the connection, second replica served it (non-stream, 70b)
  m.quota('ok');
  m.admission('70b', 'admitted');
  m.routed('kv-aware', '70b-1', 'cold');
  m.upstreamError('connect');
  m.retry('70b', 'connect');
  m.templateFallback('70b', 'unsupported');
  m.routed('kv-aware', '70b-1', 'load-bound');
  m.requestEnded({
    ...base, route: 'completions', pool: '70b', stream: false, retries: 1, durationSeconds: 0.9, upstreamSeconds: 0.896,
    ttftSeconds: 0.4, tpotSeconds: 0.045, inputTokens: 100, outputTokens: 20, cachedTokens: 0, predictedCachedTokens: 64, replica: '70b-1',
  });
}
