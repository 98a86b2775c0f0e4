// One fidelity run of the fleet simulator: one small chat workload, expressed once, run live (a real gateway
// with the kv-aware policy in front of four real in-process mock replicas shaped as the demo fleet's 8B pool,
// real HTTP over loopback, time scale 1) and in the simulator (native-bench/sim/request-list.ts: the same
// MockEngine model behind the gateway's router, admission and registry modules, on the demo fleet's 8B pool,
// in virtual time). Same prompts, so same block hashes; max_tokens with ignore_eos, so same reply lengths.
// Arrivals are 320 ms apart (about one request in flight, so live and simulated routing see the same idle
// fleet); the simulator gets the times the live requests were actually sent, so a loaded machine's late timers
// change both runs alike. Used by test/integration/sim/fidelity.test.ts (asserts) and
// `npm run bench -- sim-fidelity` (reports the TTFT ratio over several runs).
import { strict as assert } from 'node:assert';
import { chatRequests, simulateRequestList, type ListedChat } from '../../../native-bench/sim/request-list.ts';
import { loadFleet } from '../../../native-bench/sim/fleet.ts';
import { percentile } from '../../../native-bench/sim/metrics.ts';
import { Prng } from '../../../native-bench/sim/prng.ts';
import type { SimRequest } from '../../../native-bench/sim/workload-types.ts';
import { ALPHA_KEY, startStack, type TestStack } from '../../helpers/start-gateway.ts';

export const POOL = '8b';
export const POLICY = 'kv-aware';
export const REQUESTS = 40;
export const WARMUPS = 6;
const GAP_MS = 320;
const MAX_TOKENS = 16;
const TENANTS = 4;
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
export function workload(): ListedChat[] {
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
  /** When it was sent, from the run's start (the simulator's arrival time for it). */
  sentMs: number;
  ttftMs: number;
  promptTokens: number;
  cachedTokens: number;
  /** The replica the gateway chose (its x-gateway-route header). */
  replica: string;
}

/** Streams one chat through the gateway: TTFT to the first content delta, and the usage chunk's counts. */
async function sendLive(url: string, chat: ListedChat, start: number): Promise<LiveResult> {
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
  return { sentMs: t0 - start, ttftMs, promptTokens: usage.prompt_tokens, cachedTokens: usage.prompt_tokens_details?.cached_tokens ?? 0, replica };
}

export interface FidelityFleet {
  stack: TestStack;
  chats: ListedChat[];
  /** The chats tokenized and hashed for the simulator, at their planned arrival times. */
  planned: SimRequest[];
  close(): Promise<void>;
}

/** The demo fleet's 8B pool, live: its replica count and profile, the demo's routing and registry settings. */
export async function startFidelityFleet(): Promise<FidelityFleet> {
  const demo = loadFleet('demo');
  const pool = demo.pools.find((p) => p.id === POOL)!;
  const chats = workload();
  const planned = await chatRequests(chats, pool.blockSize);
  const stack = await startStack({
    pools: [{
      id: POOL, model: 'llama-3.1-8b-instruct', maxContextTokens: 131072,
      replicas: pool.replicas.map(() => ({ profile: pool.profile, model: 'llama-3.1-8b-instruct', timeScale: 1 })),
    }],
    config: { routing: { policy: POLICY }, registry: demo.config.registry },
  });
  return { stack, chats, planned, close: () => stack.close() };
}

export interface FidelityOutcome {
  /** Per request, warm-ups first: what each way saw. */
  live: LiveResult[];
  sim: ReturnType<typeof simulateRequestList>;
  simRequests: SimRequest[];
  liveHit: number;
  simHit: number;
  liveP50: number;
  simP50: number;
  report: string;
}

/** Sends the workload live on its schedule, then simulates it at the times it was actually sent. */
export async function runFidelity(fleet: FidelityFleet): Promise<FidelityOutcome> {
  const start = performance.now();
  const live = await Promise.all(fleet.chats.map(async (c) => {
    const wait = start + c.atMs - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    return sendLive(fleet.stack.url, c, start);
  }));
  // chatRequests keeps the chats' order (their planned times ascend); a late timer can swap two sends.
  const simRequests = fleet.planned.map((r, i) => ({ ...r, atMs: live[i]!.sentMs })).sort((a, b) => a.atMs - b.atMs);
  const order = simRequests.map((r) => r.seq);
  const byPlan = (i: number): number => order.indexOf(i);
  const sim = simulateRequestList('demo', POOL, POLICY, simRequests);
  let prompt = 0;
  let liveCached = 0;
  let simCached = 0;
  const liveTtft: number[] = [];
  const simTtft: number[] = [];
  for (let i = WARMUPS; i < WARMUPS + REQUESTS; i++) {
    const l = live[i]!;
    const o = sim.outcomes[byPlan(i)]!;
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
  // Outcomes in plan order, so callers index live[i] and sim outcome i alike.
  const inPlanOrder = { ...sim, outcomes: fleet.planned.map((_, i) => sim.outcomes[byPlan(i)]!) };
  return { live, sim: inPlanOrder, simRequests, liveHit, simHit, liveP50, simP50, report };
}
