// The acceptance, live: a replica filled to its KV headroom is avoided by the kv-aware router even
// though it holds the request's prefix. Real gateway, two real mock replicas with a small KV pool (300 blocks)
// at real-time step durations, so requests sent straight to one replica (bypassing the gateway) keep its
// blocks referenced while the gateway's scrapes see it full. Two layers avoid it: the kv-aware policy's own
// fit, and admission's per-replica room check behind it (which re-routes and also reports why=headroom), so
// this asserts what a client sees; the policy's layer alone is pinned in test/unit/router/kv-aware.test.ts.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { ALPHA_KEY, startStack, waitFor, type TestStack } from '../../helpers/start-gateway.ts';

const MODEL = 'llama-3.1-8b-instruct';
const BLOCKS = 300;
const BLOCK = 16;
/** The longest context the 300-block pool holds (vLLM refuses a longer max_model_len). */
const MAX_LEN = (BLOCKS - 1) * BLOCK;
const replica = { profile: 'llama-8b-a100' as const, model: MODEL, timeScale: 1, numGpuBlocks: BLOCKS, maxModelLen: MAX_LEN };
let stack: TestStack;
const fills: AbortController[] = [];

before(async () => {
  stack = await startStack({
    pools: [{ id: '8b', model: MODEL, aliases: ['gpt-fast'], maxContextTokens: MAX_LEN, replicas: [replica, replica] }],
    config: { expose_route_header: true, routing: { policy: 'kv-aware' } },
  });
});
after(async () => {
  for (const c of fills) c.abort();
  await stack.close();
});

/** ~800 tokens of a system prompt no replica has seen. */
const SYSTEM = Array.from({ length: 130 }, (_, i) => `rule ${i}: answer plainly.`).join(' ');
const filler = (n: number): string => Array.from({ length: n }, (_, i) => `note ${i}: keep going.`).join(' ');
const messages = (user: string): unknown[] => [{ role: 'system', content: SYSTEM }, { role: 'user', content: user }];

async function ask(user: string): Promise<{ replica: string; why: string; promptTokens: number }> {
  const res = await fetch(`${stack.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ALPHA_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt-fast', max_tokens: 8, messages: messages(user) }),
  });
  assert.equal(res.status, 200);
  const route = res.headers.get('x-gateway-route') ?? '';
  const field = (k: string): string => new RegExp(`(?:^|; )${k}=([^;]*)`).exec(route)?.[1] ?? '';
  const body = await res.json() as { usage: { prompt_tokens: number } };
  return { replica: field('replica'), why: field('why'), promptTokens: body.usage.prompt_tokens };
}

/** Prompt tokens of SYSTEM + filler(n), asked of a replica directly (one output token, nothing stays held). */
async function promptTokensDirect(url: string, n: number): Promise<number> {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, max_tokens: 1, messages: messages(filler(n)) }),
  });
  assert.equal(res.status, 200);
  return ((await res.json()) as { usage: { prompt_tokens: number } }).usage.prompt_tokens;
}

async function kvUse(url: string): Promise<{ use: number; running: number; preemptions: number }> {
  const s = await (await fetch(`${url}/_mock/state`)).json() as { free_blocks: number; total_blocks: number; running: number; preemptions: number };
  return { use: 1 - s.free_blocks / (s.total_blocks - 1), running: s.running, preemptions: s.preemptions };
}

void test('a replica filled to its KV headroom is avoided even though it holds the prefix', async () => {
  const first = await ask('first question: what is two plus two?');
  assert.ok(first.promptTokens > 700, `system prompt of ${first.promptTokens} tokens`);
  const repeat = await ask('second question: what is three plus three?');
  assert.equal(repeat.replica, first.replica, 'the repeat goes where the prefix is');
  assert.equal(repeat.why, 'prefix');
  const holder = stack.replicas.get(first.replica)!;
  const other = [...stack.replicas.keys()].find((id) => id !== first.replica)!;

  // Size one long request (sharing the system prompt, so its blocks keep the prefix referenced) to take ~93%
  // of the holder's pool: fit the filler's token count on two probes (it is linear in the note count).
  const t1 = await promptTokensDirect(holder.url, 50);
  const t2 = await promptTokensDirect(holder.url, 150);
  const perNote = (t2 - t1) / 100;
  const targetTokens = Math.floor(0.93 * (BLOCKS - 1)) * BLOCK;
  const notes = Math.round(50 + (targetTokens - t1) / perNote);
  // The fit allows KV use up to 1 − headroom_ratio (0.85 by default); the holder is checked past it by 0.05.
  const past = 1 - stack.cfg.admission.headroom_ratio + 0.05;
  assert.ok(past < 0.93, `headroom_ratio ${stack.cfg.admission.headroom_ratio} leaves room below the 93% fill`);

  // Sent straight to the holder: the gateway only learns of it from its scrapes. ignore_eos and a large
  // max_tokens keep it decoding (one block per 16 steps of ~11 ms) until the test aborts it.
  const fill = new AbortController();
  fills.push(fill);
  const fillRes = await fetch(`${holder.url}/v1/chat/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, signal: fill.signal,
    body: JSON.stringify({ model: MODEL, stream: true, ignore_eos: true, max_tokens: MAX_LEN - targetTokens - 2 * BLOCK, messages: messages(filler(notes)) }),
  });
  assert.equal(fillRes.status, 200);
  const state = await waitFor(async () => { const s = await kvUse(holder.url); return s.use > past ? s : null; }, 5000, 20);
  assert.equal(state.preemptions, 0);
  // Two scrape intervals, so the gateway's row carries the new usage.
  await new Promise((r) => setTimeout(r, 2 * stack.cfg.registry.scrape_interval_ms + 20));

  const avoided = await ask('third question: what is four plus four?');
  const after = await kvUse(holder.url);
  fill.abort();
  assert.ok(after.use > past && after.use < 1 && after.preemptions === 0, `holder still full and unpreempted (${after.use.toFixed(3)})`);
  assert.equal(avoided.replica, other, `went to ${avoided.replica} with the holder at ${(state.use * 100).toFixed(1)}% KV`);
  assert.equal(avoided.why, 'headroom');
});
