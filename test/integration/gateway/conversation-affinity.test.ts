// The acceptance, live: with the kv-aware policy, a conversation's next turn goes to the replica that
// served its previous turns and hits them, reply included. Real gateway, real mock replicas (whose engines
// cache a finished reply as vLLM does), route header on: the router's predicted cached blocks (prompt blocks
// learnt at dispatch, reply blocks learnt when the previous turn finished) equal what the replica reports.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { ALPHA_KEY, startStack, type TestStack } from '../../helpers/start-gateway.ts';
import { planOutput } from '../../mock-replica/output-text.ts';

let stack: TestStack;
before(async () => {
  stack = await startStack({
    config: { expose_route_header: true, routing: { policy: 'kv-aware' }, registry: { scrape_interval_ms: 50 } },
  });
});
after(async () => {
  await stack.close();
});

interface Turn { replica: string; why: string; cachedBlocks: number; promptTokens: number; completionTokens: number; cached: number; reply: string; finish: string | null }

async function turn(messages: unknown[], extra: Record<string, unknown>): Promise<Turn> {
  const res = await fetch(`${stack.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ALPHA_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt-fast', messages, stream: true, stream_options: { include_usage: true }, ...extra }),
  });
  assert.equal(res.status, 200);
  const route = res.headers.get('x-gateway-route') ?? '';
  const field = (k: string): string => new RegExp(`(?:^|; )${k}=([^;]*)`).exec(route)?.[1] ?? '';
  let reply = '';
  let finish: string | null = null;
  let cached = 0;
  let promptTokens = 0;
  let completionTokens = 0;
  for (const ev of (await res.text()).split('\n\n')) {
    if (!ev.startsWith('data: {')) continue;
    const j = JSON.parse(ev.slice(6)) as { choices: Array<{ delta: { content?: string }; finish_reason: string | null }>; usage?: { prompt_tokens: number; completion_tokens: number; prompt_tokens_details?: { cached_tokens: number } } };
    for (const c of j.choices) {
      reply += c.delta.content ?? '';
      finish = c.finish_reason ?? finish;
    }
    if (j.usage) {
      promptTokens = j.usage.prompt_tokens;
      completionTokens = j.usage.completion_tokens;
      cached = j.usage.prompt_tokens_details?.cached_tokens ?? 0;
    }
  }
  return { replica: field('replica'), why: field('why'), cachedBlocks: Number(field('cached_blocks')), promptTokens, completionTokens, cached, reply, finish };
}

/** Request seeds whose reply on the mock (replica seed 0) stops naturally after 30 to 150 tokens. */
function stopSeeds(n: number): number[] {
  const out: number[] = [];
  for (let seed = 1; out.length < n; seed++) {
    const plan = planOutput(400, false, seed, 0, true);
    if (plan.finishReason === 'stop' && plan.outputTokens >= 30 && plan.outputTokens <= 150) out.push(seed);
  }
  return out;
}

test('each conversation\'s next turns stay on its replica and hit every earlier turn, replies included', async () => {
  const seeds = stopSeeds(12);
  const conversations = ['tides', 'glaciers', 'volcanoes', 'monsoons'].map((topic) => [
    { role: 'system', content: `You are a geography tutor. Today's topic is ${topic}; answer in plain words and keep to the topic.` },
    { role: 'user', content: `Tell me how ${topic} form.` },
  ] as Array<{ role: string; content: string }>);
  const homes: string[] = [];
  const last: Turn[] = [];
  for (let t = 0; t < 3; t++) {
    for (const [c, messages] of conversations.entries()) {
      const r = await turn(messages, { seed: seeds[t * conversations.length + c], max_tokens: 400 });
      assert.equal(r.finish, 'stop');
      if (t === 0) homes.push(r.replica);
      else {
        assert.equal(r.replica, homes[c], `conversation ${c} turn ${t + 1} stays on its replica`);
        assert.equal(r.why, 'prefix');
        // The replica computed the previous turn's prompt and every reply token but the EOS that ended it:
        // all their full blocks are hit, and the router predicted exactly those.
        const prev = last[c]!;
        assert.equal(r.cached, Math.floor((prev.promptTokens + prev.completionTokens - 1) / 16) * 16, `conversation ${c} turn ${t + 1}: the previous reply is hit`);
        assert.equal(r.cachedBlocks * 16, r.cached, `conversation ${c} turn ${t + 1}: predicted ${r.cachedBlocks} blocks`);
      }
      last[c] = r;
      messages.push({ role: 'assistant', content: r.reply }, { role: 'user', content: `And after that (${t + 1})?` });
    }
  }
});
