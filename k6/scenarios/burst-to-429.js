// burst-to-429: when a tenant bursts past its quota, does it get honest 429s (OpenAI envelope, a known code,
// Retry-After in whole seconds >= 1) while nothing else fails? Uses the demo's `sk-demo-tiny` tenant
// (burst 4,000 tokens, refill 100 tokens/s, 2 in flight) and an arrival-rate burst far above that.
// Pass: some 429s happen, every 429 is well formed, and every response is a 200 or a 429.
// Knobs: GATEWAY_URL, MODEL, API_KEY (sk-demo-tiny), RATE (arrivals/s, 50), DURATION (20s), MAX_TOKENS (64).
import http from 'k6/http';
import { check } from 'k6';
import { Counter, Rate } from 'k6/metrics';
import { chatParams, chatRequestBody, env, errorEnvelope } from '../lib/openai.js';

const apiKey = __ENV.API_KEY || 'sk-demo-tiny';
const rate = Number(__ENV.RATE || 50);
const rateLimited = new Counter('rate_limited');
const unexpectedStatus = new Rate('unexpected_status');
const wellFormed429 = new Rate('well_formed_429');
const RATE_LIMIT_CODES = ['rate_limit_exceeded', 'concurrency_limit_exceeded', 'server_overloaded'];

// A 429 is the expected answer here, so it must not count in http_req_failed.
http.setResponseCallback(http.expectedStatuses(200, 429));

/** @type {import('k6/options').Options} */
export const options = {
  scenarios: {
    burst: {
      executor: 'constant-arrival-rate',
      rate,
      timeUnit: '1s',
      duration: __ENV.DURATION || '20s',
      preAllocatedVUs: Math.max(10, rate),
      maxVUs: rate * 4,
    },
  },
  thresholds: {
    'http_req_failed{kind:completion}': ['rate<0.01'],
    unexpected_status: ['rate==0'],
    well_formed_429: ['rate==1'],
    rate_limited: ['count>0'],
  },
};

export default function () {
  const o = { apiKey, maxTokens: env.maxTokens, stream: false };
  const res = http.post(`${env.gatewayUrl}/v1/chat/completions`, chatRequestBody(o), chatParams(o));
  unexpectedStatus.add(res.status !== 200 && res.status !== 429);
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
