// The gateway's prompt token count (used for quota math and context limits, shown in x-gateway-route) equals
// the replica's usage.prompt_tokens for the same request, over the tokenizer corpus, for chat (one and several
// turns, with a system prompt) and completions, inline and through the tokenizer's worker pool.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { ALPHA_KEY, startStack, type TestStack } from '../../helpers/start-gateway.ts';

const corpus = JSON.parse(readFileSync(new URL('../../fixtures/tokenizer/corpus.json', import.meta.url), 'utf8')) as Array<{ name: string; text: string }>;
let stack: TestStack;

before(async () => {
  stack = await startStack({
    pools: [{ id: '8b', model: 'llama-3.1-8b-instruct', maxContextTokens: 131072, replicas: [{ profile: 'llama-8b-a100', timeScale: 0.01 }] }],
    // small inline cut-off so long corpus entries go through the worker pool
    config: { tokenizer: { threads: 1, inline_max_chars: 200, cache_bytes: 8 * 1024 * 1024 } },
  });
});

after(async () => {
  await stack.close();
});

async function compare(path: string, body: Record<string, unknown>): Promise<void> {
  const res = await fetch(`${stack.url}${path}`, {
    method: 'POST', headers: { authorization: `Bearer ${ALPHA_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'llama-3.1-8b-instruct', max_tokens: 1, ...body }),
  });
  assert.equal(res.status, 200, await res.clone().text());
  const route = res.headers.get('x-gateway-route') ?? '';
  const ours = Number(/prompt_tokens=(\d+)/.exec(route)?.[1]);
  const usage = ((await res.json()) as { usage: { prompt_tokens: number } }).usage;
  assert.equal(ours, usage.prompt_tokens, `${path} ${JSON.stringify(body).slice(0, 80)}`);
}

test('chat prompts: the gateway counts exactly what the replica counts', async () => {
  for (const entry of corpus) {
    await compare('/v1/chat/completions', { messages: [{ role: 'user', content: entry.text }] });
  }
});

test('multi-turn chats with a shared system prompt count the same on both sides', async () => {
  const system = corpus.map((c) => c.text).join('\n').slice(0, 6000);
  for (let i = 0; i + 1 < corpus.length; i += 3) {
    await compare('/v1/chat/completions', {
      messages: [
        { role: 'system', content: system },
        { role: 'user', content: corpus[i]!.text },
        { role: 'assistant', content: corpus[i + 1]!.text },
        { role: 'user', content: [{ type: 'text', text: `  ${corpus[(i + 2) % corpus.length]!.text}  ` }] },
      ],
    });
  }
});

test('completions prompts: strings and token arrays', async () => {
  for (const entry of corpus) await compare('/v1/completions', { prompt: entry.text });
  await compare('/v1/completions', { prompt: [128000, 9906, 1917, 0] });
});
