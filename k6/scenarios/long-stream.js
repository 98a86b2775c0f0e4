// long-stream: do long generations stream smoothly end to end? A few VUs each hold a stream of MAX_TOKENS
// tokens (ignore_eos, so exactly that many); every stream must arrive whole (usage.completion_tokens ==
// MAX_TOKENS, data: [DONE], no error event) with inter-token latency under ITL_P99_MS at p99 — the gateway must
// not buffer or stall a long relay.
// Knobs: GATEWAY_URL, MODEL, API_KEY, VUS (4), DURATION (120s), MAX_TOKENS (2000), ITL_P99_MS (100), TTFT_P99_MS (400).
import { chatStream, env } from '../lib/openai.js';

const maxTokens = Number(__ENV.MAX_TOKENS || 2000);

/** @type {import('k6/options').Options} */
export const options = {
  scenarios: {
    long: { executor: 'constant-vus', vus: Number(__ENV.VUS || 4), duration: __ENV.DURATION || '120s', gracefulStop: '120s' },
  },
  thresholds: {
    'http_req_failed{kind:completion}': ['rate==0'],
    stream_ok: ['rate==1'],
    checks: ['rate==1'],
    ttft: [`p(99)<${Number(__ENV.TTFT_P99_MS || 400)}`],
    inter_token_latency: [`p(99)<${Number(__ENV.ITL_P99_MS || 100)}`],
  },
};

export default function () {
  chatStream({ maxTokens, ignoreEos: true, timeout: '600s', model: env.model });
}
