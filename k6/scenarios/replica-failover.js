// replica-failover: do clients keep succeeding while replicas fail before the first token? Steady streaming
// load through the gateway while a `chaos` scenario faults replicas through the mock's POST /_mock/faults:
//   0-20%: healthy; 20-40%: replica 1 error_before_first_token (500); 40-60%: replica 2 refuse_connections;
//   60-80%: replica 1 unhealthy (/health and /v1/* answer 503); 80-100%: every fault cleared.
// The gateway retries pre-first-byte failures on another replica, so the client error rate stays under 1% and
// TTFT p99 under FAILOVER_TTFT_P99_MS. teardown() clears every fault even if the run is interrupted mid-way.
// Knobs: GATEWAY_URL, MODEL, API_KEY, VUS (8), DURATION (60s), MAX_TOKENS (32),
// REPLICA_URLS (comma list; default: the demo's 8B replicas 127.0.0.1:8111-8114), FAILOVER_TTFT_P99_MS (1000).
import http from 'k6/http';
import { check, sleep } from 'k6';
import { chatStream } from '../lib/openai.js';

const replicas = (__ENV.REPLICA_URLS || 'http://127.0.0.1:8111,http://127.0.0.1:8112,http://127.0.0.1:8113,http://127.0.0.1:8114')
  .split(',').map((u) => u.trim().replace(/\/+$/, '')).filter((u) => u.length > 0);
const duration = __ENV.DURATION || '60s';

/** @param {string} d k6 duration such as `60s`, `2m` or `1m30s` */
function seconds(d) {
  let total = 0;
  const re = /([0-9.]+)(ms|s|m|h)/g;
  let m;
  while ((m = re.exec(d)) !== null) {
    const unit = m[2];
    total += Number(m[1]) * (unit === 'ms' ? 0.001 : unit === 'm' ? 60 : unit === 'h' ? 3600 : 1);
  }
  return total || 60;
}

/** @type {import('k6/options').Options} */
export const options = {
  scenarios: {
    load: { executor: 'constant-vus', vus: Number(__ENV.VUS || 8), duration, exec: 'load' },
    chaos: { executor: 'shared-iterations', vus: 1, iterations: 1, exec: 'chaos', maxDuration: duration },
  },
  thresholds: {
    'http_req_failed{kind:completion}': ['rate<0.01'],
    'checks{kind:completion}': ['rate>0.99'],
    'http_req_failed{kind:fault}': ['rate==0'],
    stream_ok: ['rate>0.99'],
    ttft: [`p(99)<${Number(__ENV.FAILOVER_TTFT_P99_MS || 1000)}`],
  },
};

/**
 * @param {string} replicaUrl
 * @param {{ mode: string, status?: number }} fault
 */
function setFault(replicaUrl, fault) {
  const res = http.post(`${replicaUrl}/_mock/faults`, JSON.stringify(fault),
    { headers: { 'content-type': 'application/json' }, tags: { kind: 'fault' } });
  check(res, { [`fault ${fault.mode} accepted`]: (r) => r.status === 200 }, { kind: 'fault' });
}

export function setup() {
  if (replicas.length < 2) throw new Error('replica-failover needs at least two REPLICA_URLS');
  for (const r of replicas) setFault(r, { mode: 'none' });
}

export function load() {
  chatStream({ maxTokens: Number(__ENV.MAX_TOKENS || 32), tags: { phase: 'load' } });
}

export function chaos() {
  const slice = seconds(duration) / 5;
  const first = replicas[0] || '';
  const second = replicas[1] || '';
  sleep(slice);
  setFault(first, { mode: 'error_before_first_token', status: 500 });
  sleep(slice);
  setFault(first, { mode: 'none' });
  setFault(second, { mode: 'refuse_connections' });
  sleep(slice);
  setFault(second, { mode: 'none' });
  setFault(first, { mode: 'unhealthy' });
  sleep(slice);
  setFault(first, { mode: 'none' });
}

export function teardown() {
  for (const r of replicas) setFault(r, { mode: 'none' });
}
