// seed-mix: up to what arrival rate does the gateway hold the design's SLA under the design's traffic?
// One constant-arrival-rate scenario per rate in RATES, run one after another (an upward sweep); every request is
// a stream drawn from the design's mix (lib/seed-mix.js: tenants' shared system prompts, multi-turn chats, prompts
// to 32k and outputs to 4k, ~1,800 / 300 tokens on average). Each rate has its own thresholds, the design's SLA:
// TTFT p50 < 180 ms and p99 < 400 ms for prompts up to 4,000 tokens (ttft{prompt:short}), TPOT p95 < 50 ms
// (inter_token_latency: the mean gap between a stream's tokens), under 1 % failed. The answer is the highest rate
// whose thresholds all pass; k6 exits 99 when a higher rate broke, which is what a sweep is for.
// Knobs: GATEWAY_URL, MODEL, API_KEY, RATES (req/s, "2,4,8,16"), STEP_DURATION ("60s"), GAP_SECONDS (20: drain
// between rates), TTFT_P50_MS (180), TTFT_P99_MS (400), TPOT_P95_MS (50).
import { chatStream } from '../lib/openai.js';
import { nextRequest } from '../lib/seed-mix.js';

const rates = (__ENV.RATES || '2,4,8,16').split(',').map(Number).filter((r) => r > 0);
const step = __ENV.STEP_DURATION || '60s';
const stepSeconds = Number(step.replace(/s$/, ''));
const gap = Number(__ENV.GAP_SECONDS || 20);
const ttftP50 = Number(__ENV.TTFT_P50_MS || 180);
const ttftP99 = Number(__ENV.TTFT_P99_MS || 400);
const tpotP95 = Number(__ENV.TPOT_P95_MS || 50);
/** Prompts up to this many tokens are covered by the TTFT targets. */
const SHORT_PROMPT = 4000;

/** @type {{ [name: string]: import('k6/options').Scenario }} */
const scenarios = {};
/** @type {{ [metric: string]: string[] }} */
const thresholds = {};
rates.forEach((rate, i) => {
  const name = `rate_${rate}`;
  scenarios[name] = {
    executor: 'constant-arrival-rate',
    rate,
    timeUnit: '1s',
    duration: step,
    startTime: `${i * (stepSeconds + gap)}s`,
    // A 300-token stream at 50 ms per token is open ~15 s: enough VUs that arrivals never wait for one.
    preAllocatedVUs: Math.ceil(rate * 20),
    maxVUs: Math.ceil(rate * 60),
  };
  thresholds[`ttft{scenario:${name},prompt:short}`] = [`p(50)<${ttftP50}`, `p(99)<${ttftP99}`];
  thresholds[`inter_token_latency{scenario:${name}}`] = [`p(95)<${tpotP95}`];
  thresholds[`http_req_failed{scenario:${name}}`] = ['rate<0.01'];
});

/** @type {import('k6/options').Options} */
export const options = { scenarios, thresholds };

export default function () {
  const r = nextRequest();
  chatStream({
    messages: r.messages,
    maxTokens: r.outputTokens,
    ignoreEos: true,
    timeout: '300s',
    tags: { prompt: r.promptTokens <= SHORT_PROMPT ? 'short' : 'long' },
  });
}
