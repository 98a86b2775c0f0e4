// overload: when a tenant bursts far past its limits, does it get honest 429s and nothing else fails?
// Scenario `burst`: arrivals at RATE per second for DURATION from the demo's `sk-demo-tiny` tenant (burst 4,000
// tokens, refill 100 tokens/s, 2 in flight). Every 429 must carry the OpenAI envelope, a rate-limit `code` and
// `Retry-After` in whole seconds ≥ 1; any answer but 200 or 429 (a 5xx above all) fails the run.
// Scenario `honesty` (one VU, after the burst has drained): requests back to back until a 429 says "retry after
// R s"; at R − 1 s a request must still be refused (when R ≥ 2: the header did not overstate the wait) and at
// R s it must be accepted (it did not understate it), PROBES times.
// Knobs: GATEWAY_URL, MODEL, API_KEY (sk-demo-tiny), RATE (arrivals/s, 50), DURATION (20s), MAX_TOKENS (64), PROBES (3).
import http from 'k6/http';
import { check, sleep } from 'k6';
import { Counter, Rate } from 'k6/metrics';
import { chatParams, chatRequestBody, env, errorEnvelope } from '../lib/openai.js';

const apiKey = __ENV.API_KEY || 'sk-demo-tiny';
const rate = Number(__ENV.RATE || 50);
const duration = __ENV.DURATION || '20s';
const probes = Number(__ENV.PROBES || 3);
const rateLimited = new Counter('rate_limited');
const serverErrors = new Counter('server_errors');
const unexpectedStatus = new Rate('unexpected_status');
const wellFormed429 = new Rate('well_formed_429');
/** 1 per honesty probe whose answer matched what its Retry-After promised. */
const retryAfterHonest = new Rate('retry_after_honest');
const RATE_LIMIT_CODES = ['rate_limit_exceeded', 'concurrency_limit_exceeded', 'server_overloaded'];

// A 429 is the expected answer here, so it must not count in http_req_failed.
http.setResponseCallback(http.expectedStatuses(200, 429));

/** @type {import('k6/options').Options} */
export const options = {
  scenarios: {
    burst: {
      executor: 'constant-arrival-rate',
      exec: 'burst',
      rate,
      timeUnit: '1s',
      duration,
      preAllocatedVUs: Math.max(10, rate),
      maxVUs: rate * 4,
    },
    honesty: {
      executor: 'per-vu-iterations',
      exec: 'honesty',
      vus: 1,
      iterations: probes,
      // After the burst and the longest request it can leave in flight.
      startTime: `${Number(duration.replace(/s$/, '')) + 15}s`,
      maxDuration: '5m',
    },
  },
  thresholds: {
    'http_req_failed{kind:completion}': ['rate<0.01'],
    unexpected_status: ['rate==0'],
    server_errors: ['count==0'],
    well_formed_429: ['rate==1'],
    rate_limited: ['count>0'],
    retry_after_honest: ['rate==1'],
  },
};

function send() {
  const o = { apiKey, maxTokens: env.maxTokens, stream: false };
  const res = http.post(`${env.gatewayUrl}/v1/chat/completions`, chatRequestBody(o), chatParams(o));
  unexpectedStatus.add(res.status !== 200 && res.status !== 429);
  if (res.status >= 500) serverErrors.add(1);
  return res;
}

export function burst() {
  const res = send();
  if (res.status !== 429) return;
  rateLimited.add(1);
  const err = errorEnvelope(res.body);
  const retryAfter = String(res.headers['Retry-After'] || '');
  const ok = check(res, {
    '429: OpenAI error envelope': () => err !== null && typeof err.message === 'string',
    '429: known rate-limit code': () => err !== null && RATE_LIMIT_CODES.includes(String(err.code)),
    '429: Retry-After is whole seconds >= 1': () => /^[0-9]+$/.test(retryAfter) && Number(retryAfter) >= 1,
  });
  wellFormed429.add(ok);
}

export function honesty() {
  let retryAfter = 0;
  let at = 0;
  for (let i = 0; i < 200 && retryAfter === 0; i++) {
    const res = send();
    if (res.status === 429) {
      retryAfter = Number(res.headers['Retry-After'] || 0);
      at = Date.now();
    }
  }
  if (!check(retryAfter, { 'honesty: a 429 with Retry-After came': (r) => r >= 1 })) return;
  if (retryAfter >= 2) {
    sleep(Math.max(0, at + (retryAfter - 1) * 1000 - Date.now()) / 1000);
    const early = send();
    retryAfterHonest.add(check(early, { 'honesty: still refused at Retry-After - 1 s': (r) => r.status === 429 }));
    // Accepted early, it spent the tokens the on-time request was promised: nothing left to check.
    if (early.status === 200) return;
  }
  sleep(Math.max(0, at + retryAfter * 1000 + 20 - Date.now()) / 1000);
  const onTime = send();
  retryAfterHonest.add(check(onTime, { 'honesty: accepted at Retry-After': (r) => r.status === 200 }));
}
