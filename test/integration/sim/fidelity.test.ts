// Fidelity of the fleet simulator: one small chat workload, expressed once, run live (a real gateway with the
// kv-aware policy in front of four real in-process mock replicas shaped as the demo fleet's 8B pool, real HTTP
// over loopback, time scale 1) and in the simulator (native-bench/sim/request-list.ts: the same MockEngine
// model behind the gateway's router, admission and registry modules, on the demo fleet's 8B pool, in virtual
// time). Same prompts, so same block hashes; max_tokens with ignore_eos, so same reply lengths; same arrival
// times (320 ms apart: about one request in flight, so live and simulated routing see the same idle fleet).
// Asserted: every request's prompt length agrees; the prefix hit rate (cached / prompt tokens of the measured
// requests) within 5 points; live TTFT p50 (send to the first content delta at the client) no lower than
// 0.8 × the simulated one. The upper side (within +20 %) is asserted only on a machine that is not
// overloaded (1-minute load average ≤ its cores): on an oversubscribed one the live path's own CPU (the
// gateway's and the mocks' tokenization, HTTP, event-loop delays) adds tens of ms the simulator does not
// model, so the ratio is printed instead. `FIDELITY_TABLE=1` prints every request both ways.
import { strict as assert } from 'node:assert';
import { cpus, loadavg } from 'node:os';
import { after, before, test } from 'node:test';
import { chatRequests, simulateRequestList, type ListedChat } from '../../../native-bench/sim/request-list.ts';
import { loadFleet } from '../../../native-bench/sim/fleet.ts';
import { percentile } from '../../../native-bench/sim/metrics.ts';
import { Prng } from '../../../native-bench/sim/prng.ts';
import type { SimRequest } from '../../../native-bench/sim/workload-types.ts';
import { ALPHA_KEY, startStack, type TestStack } from '../../helpers/start-gateway.ts';

const POOL = '8b';
const POLICY = 'kv-aware';
const REQUESTS = 40;
const GAP_MS = 320;
const MAX_TOKENS = 16;
const TENANTS = 4;
const WARMUPS = 6;
const WARMUP_GAP_MS = 250;

const VOCAB = [
  'account', 'answer', 'billing', 'careful', 'customer', 'detail', 'energy', 'format', 'general', 'history',
  'invoice', 'journal', 'kernel', 'ledger', 'market', 'network', 'option', 'policy', 'quality', 'record',
  'service', 'ticket', 'update', 'value', 'window', 'yellow', 'zone', 'budget', 'cluster', 'deploy',
];

function text(rng: Prng, words: number): string {
  const out: string[] = [];
  for (let i = 0; i < words; i++) out.push(VOCAB[rng.int(VOCAB.length)]!);
  return out.join(' ');
}

/**
 * WARMUPS requests with prompts of their own (they share no block with anything), then REQUESTS measured ones:
 * TENANTS system prompts of ~1,100–1,700 tokens, each request a tenant's prompt and a fresh ~500–800-token
 * question. The warm-ups run both ways too, so the router and engines start the measured part in the same state.
 */
function workload(): ListedChat[] {
  const rng = new Prng(15, 1);
  const warm = Array.from({ length: WARMUPS }, (_, i) => ({
    atMs: i * WARMUP_GAP_MS,
    messages: [{ role: 'user', content: `Warm-up ${i}: ${text(rng, 400)}` }],
    maxTokens: MAX_TOKENS,
  }));
  const systems = Array.from({ length: TENANTS }, (_, t) => `You are the assistant of tenant ${t}. ${text(rng, 1100 + 200 * t)}`);
  const measured = Array.from({ length: REQUESTS }, (_, i) => ({
    atMs: WARMUPS * WARMUP_GAP_MS + i * GAP_MS,
    messages: [{ role: 'system', content: systems[rng.int(TENANTS)]! }, { role: 'user', content: `Question ${i}: ${text(rng, 500 + rng.int(300))}` }],
    maxTokens: MAX_TOKENS,
  }));
  return [...warm, ...measured];
}

interface Usage {
  prompt_tokens: number;
  prompt_tokens_details?: { cached_tokens?: number } | null;
}

interface LiveResult {
  ttftMs: number;
  promptTokens: number;
  cachedTokens: number;
  /** The replica the gateway chose (its x-gateway-route header). */
  replica: string;
}

/** Streams one chat through the gateway: TTFT to the first content delta, and the usage chunk's counts. */
async function sendLive(url: string, chat: ListedChat): Promise<LiveResult> {
  const t0 = performance.now();
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${ALPHA_KEY}` },
    body: JSON.stringify({
      model: 'llama-3.1-8b-instruct', messages: chat.messages, max_tokens: chat.maxTokens, ignore_eos: true,
      stream: true, stream_options: { include_usage: true },
    }),
  });
  assert.equal(res.status, 200);
  const replica = /replica=([^;]+)/.exec(res.headers.get('x-gateway-route') ?? '')?.[1] ?? '?';
  let ttftMs = Number.NaN;
  let usage: Usage | null = null;
  let buf = '';
  const decoder = new TextDecoder();
  for await (const chunk of res.body!) {
    buf += decoder.decode(chunk as Uint8Array, { stream: true });
    let nl: number;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl).trim();
      buf = buf.slice(nl + 1);
      if (!line.startsWith('data: ') || line === 'data: [DONE]') continue;
      const ev = JSON.parse(line.slice(6)) as { choices?: Array<{ delta?: { content?: string } }>; usage?: Usage };
      if (Number.isNaN(ttftMs) && ev.choices?.[0]?.delta?.content) ttftMs = performance.now() - t0;
      if (ev.usage) usage = ev.usage;
    }
  }
  assert.ok(usage, 'the stream ends with a usage chunk');
  return { ttftMs, promptTokens: usage.prompt_tokens, cachedTokens: usage.prompt_tokens_details?.cached_tokens ?? 0, replica };
}

let stack: TestStack;
const chats = workload();
let simRequests: SimRequest[];

before(async () => {
  const demo = loadFleet('demo');
  const pool = demo.pools.find((p) => p.id === POOL)!;
  simRequests = await chatRequests(chats, pool.blockSize);
  // The demo fleet's 8B pool, live: its replica count and profile, the demo's routing and registry settings.
  stack = await startStack({
    pools: [{
      id: POOL, model: 'llama-3.1-8b-instruct', maxContextTokens: 131072,
      replicas: pool.replicas.map(() => ({ profile: pool.profile, model: 'llama-3.1-8b-instruct', timeScale: 1 })),
    }],
    config: { routing: { policy: POLICY }, registry: demo.config.registry },
  });
});

after(async () => {
  await stack?.close();
});

test('the simulator and a live gateway agree on prefix hit rate and TTFT p50 for the same requests', { timeout: 60_000 }, async () => {
  const start = performance.now();
  const live = await Promise.all(chats.map(async (c) => {
    const wait = start + c.atMs - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    return sendLive(stack.url, c);
  }));

  const sim = simulateRequestList('demo', POOL, POLICY, simRequests);
  assert.equal(sim.figures.completed, WARMUPS + REQUESTS, 'every simulated request completes');

  let prompt = 0;
  let liveCached = 0;
  let simCached = 0;
  const liveTtft: number[] = [];
  const simTtft: number[] = [];
  for (let i = 0; i < WARMUPS + REQUESTS; i++) {
    const l = live[i]!;
    const o = sim.outcomes[i]!;
    assert.equal(l.promptTokens, simRequests[i]!.promptTokens, `request ${i}: same prompt length both ways`);
    assert.ok(!Number.isNaN(l.ttftMs), `request ${i}: a content delta arrived`);
    if (process.env.FIDELITY_TABLE) console.log(`${i} prompt ${l.promptTokens} | live ${l.replica} cached ${l.cachedTokens} ttft ${l.ttftMs.toFixed(1)} | sim ${POOL}-${o.slot + 1} cached ${o.cachedTokens} ttft ${o.ttftMs.toFixed(1)}`);
    if (i < WARMUPS) continue;
    prompt += l.promptTokens;
    liveCached += l.cachedTokens;
    simCached += o.cachedTokens;
    liveTtft.push(l.ttftMs);
    simTtft.push(o.ttftMs);
  }
  const liveHit = liveCached / prompt;
  const simHit = simCached / prompt;
  const liveP50 = percentile(liveTtft.sort((a, b) => a - b), 0.5);
  const simP50 = percentile(simTtft.sort((a, b) => a - b), 0.5);
  const report = `hit rate live ${(100 * liveHit).toFixed(1)} % sim ${(100 * simHit).toFixed(1)} %; ` +
    `TTFT p50 live ${liveP50.toFixed(1)} ms sim ${simP50.toFixed(1)} ms (ratio ${(liveP50 / simP50).toFixed(3)})`;
  console.log(`fidelity: ${report}`);

  // A workload that shares nothing would agree trivially: the tenants' prompts must be hit most of the time.
  assert.ok(simHit > 0.4, `the workload exercises the prefix cache (${report})`);
  assert.ok(Math.abs(liveHit - simHit) <= 0.05, `prefix hit rates within 5 points: ${report}`);
  assert.ok(liveP50 >= 0.8 * simP50, `live TTFT p50 not below the simulated one by more than 20 %: ${report}`);
  const load = loadavg()[0]!;
  if (load <= cpus().length) assert.ok(liveP50 <= 1.2 * simP50, `TTFT p50 within 20 % (load average ${load.toFixed(1)}): ${report}`);
  else console.log(`fidelity: TTFT upper bound not asserted: load average ${load.toFixed(1)} on ${cpus().length} cores`);
});
