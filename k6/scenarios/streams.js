// streams: can the gateway hold N streams open at once, and how much memory does each cost it?
// VUS virtual users each keep one long stream open (MAX_TOKENS tokens with ignore_eos, so it lasts the whole
// generation), for DURATION. A `sampler` scenario reads the gateway's resident memory from its /metrics
// (gateway_process_resident_memory_bytes) before the streams open and again mid-run, and records
// (during − before) / VUS as `rss_per_stream_bytes`. Every stream must end with [DONE] and no error event, and
// the first token must come within the design's TTFT p99. Run it from a machine (or k6 instance) whose open-file
// limit allows VUS sockets; the gateway needs two per stream (client and replica).
// Knobs: GATEWAY_URL, MODEL, API_KEY, VUS (1000), DURATION (120s), MAX_TOKENS (2000), TTFT_P99_MS (400),
// RSS_PER_STREAM_MAX (10240 bytes), SAMPLE_AFTER_S (60).
import http from 'k6/http';
import { check, sleep } from 'k6';
import { Trend } from 'k6/metrics';
import { chatStream, env } from '../lib/openai.js';

const vus = Number(__ENV.VUS || 1000);
const sampleAfter = Number(__ENV.SAMPLE_AFTER_S || 60);
const rssPerStream = new Trend('rss_per_stream_bytes');

/** @type {import('k6/options').Options} */
export const options = {
  scenarios: {
    streams: { executor: 'constant-vus', exec: 'stream', vus, duration: __ENV.DURATION || '120s', startTime: '5s' },
    sampler: { executor: 'per-vu-iterations', exec: 'sample', vus: 1, iterations: 1, maxDuration: '10m' },
  },
  thresholds: {
    'http_req_failed{kind:completion}': ['rate<0.01'],
    stream_ok: ['rate>0.99'],
    ttft: [`p(99)<${Number(__ENV.TTFT_P99_MS || 400)}`],
    rss_per_stream_bytes: [`max<${Number(__ENV.RSS_PER_STREAM_MAX || 10240)}`],
  },
};

/** The gateway's resident set in bytes from its Prometheus page. */
function gatewayRss() {
  const res = http.get(`${env.gatewayUrl}/metrics`, { tags: { kind: 'metrics' } });
  const m = /^gateway_process_resident_memory_bytes (\S+)$/m.exec(String(res.body));
  return m ? Number(m[1]) : NaN;
}

export function sample() {
  const before = gatewayRss();
  // The streams scenario starts at 5 s; by SAMPLE_AFTER_S every VU has its stream open.
  sleep(5 + sampleAfter);
  const during = gatewayRss();
  if (check(during - before, { 'sampler: gateway RSS read twice': (d) => Number.isFinite(d) })) rssPerStream.add((during - before) / vus);
}

export function stream() {
  chatStream({ maxTokens: Number(__ENV.MAX_TOKENS || 2000), ignoreEos: true, timeout: '600s' });
}
