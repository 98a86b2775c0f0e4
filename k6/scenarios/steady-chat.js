// steady-chat: does the gateway hold its latency SLO under a steady, realistic mix of chat traffic?
// VUS virtual users for DURATION, 3 of 4 requests streaming, 1 of 4 non-streaming; every request must
// succeed and time to first token stays under TTFT_P99_MS at p99. Runs against `npm run demo`
// (mock replicas at real-time A100 speeds) unless GATEWAY_URL points elsewhere.
// Knobs: GATEWAY_URL, MODEL, API_KEY, VUS, DURATION, MAX_TOKENS, TTFT_P99_MS (400), ITL_P99_MS (100).
import { sleep } from 'k6';
import { chat, chatStream, env } from '../lib/openai.js';

/** @type {import('k6/options').Options} */
export const options = {
  scenarios: {
    steady: { executor: 'constant-vus', vus: env.vus, duration: env.duration },
  },
  thresholds: {
    'http_req_failed{kind:completion}': ['rate<0.01'],
    checks: ['rate>0.99'],
    stream_ok: ['rate>0.99'],
    ttft: [`p(99)<${Number(__ENV.TTFT_P99_MS || 400)}`, 'p(50)<200'],
    inter_token_latency: [`p(99)<${Number(__ENV.ITL_P99_MS || 100)}`],
  },
};

export default function () {
  if (Math.random() < 0.75) chatStream({ maxTokens: env.maxTokens });
  else chat({ maxTokens: env.maxTokens });
  // Think time between a user's requests, 0-200 ms.
  sleep(Math.random() * 0.2);
}
