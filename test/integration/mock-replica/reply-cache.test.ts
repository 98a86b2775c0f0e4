// Over HTTP: the next turn of a conversation, sent to the same replica with the reply as the client received
// it (JSON or streamed), reports cached_tokens covering the previous turn's prompt and reply.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startMockReplica, type MockReplica } from '../../helpers/mock-replicas.ts';

let replica: MockReplica;
before(async () => {
  replica = await startMockReplica({ profile: 'tiny', seed: 3 });
});
after(() => replica.close());

interface ChatJson {
  choices: Array<{ message: { content: string }; finish_reason: string }>;
  usage: { prompt_tokens: number; completion_tokens: number; prompt_tokens_details: { cached_tokens: number } | null };
}

async function chat(messages: unknown[], extra: Record<string, unknown> = {}): Promise<ChatJson> {
  const res = await fetch(`${replica.url}/v1/chat/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ messages, ...extra }),
  });
  assert.equal(res.status, 200);
  return await res.json() as ChatJson;
}

/** Streams a chat request and returns the concatenated content and the finish reason. */
async function chatStream(messages: unknown[], extra: Record<string, unknown>): Promise<{ content: string; finish: string | null; promptTokens: number; completionTokens: number }> {
  const res = await fetch(`${replica.url}/v1/chat/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ messages, stream: true, stream_options: { include_usage: true }, ...extra }),
  });
  let content = '';
  let finish: string | null = null;
  let promptTokens = 0;
  let completionTokens = 0;
  for (const line of (await res.text()).split('\n')) {
    if (!line.startsWith('data: {')) continue;
    const chunk = JSON.parse(line.slice(6)) as { choices: Array<{ delta: { content?: string }; finish_reason: string | null }>; usage?: { prompt_tokens: number; completion_tokens: number } };
    for (const c of chunk.choices) {
      content += c.delta.content ?? '';
      finish = c.finish_reason ?? finish;
    }
    if (chunk.usage) {
      promptTokens = chunk.usage.prompt_tokens;
      completionTokens = chunk.usage.completion_tokens;
    }
  }
  return { content, finish, promptTokens, completionTokens };
}

const floor16 = (n: number): number => Math.floor(n / 16) * 16;

void test('turn 2 (JSON) hits turn 1\'s prompt and reply: cached_tokens = full blocks of prompt + reply', async () => {
  const turn1 = [{ role: 'system', content: 'Answer briefly.' }, { role: 'user', content: 'What is a KV cache block?' }];
  const r1 = await chat(turn1, { seed: 11 });
  assert.equal(r1.choices[0]!.finish_reason, 'stop');
  const reply = r1.choices[0]!.message.content;
  const r2 = await chat([...turn1, { role: 'assistant', content: reply }, { role: 'user', content: 'Thanks. And a page?' }], { max_tokens: 1 });
  // Turn 1 computed its prompt and every sampled token but the EOS that ended it.
  const computed = r1.usage.prompt_tokens + r1.usage.completion_tokens - 1;
  assert.ok(computed - r1.usage.prompt_tokens >= 16, `the reply fills a block (${r1.usage.completion_tokens} tokens)`);
  assert.equal(r2.usage.prompt_tokens_details?.cached_tokens, floor16(computed));
});

void test('turn 2 after a streamed reply cut by max_tokens hits up to the reply\'s last computed token', async () => {
  const turn1 = [{ role: 'user', content: 'Describe continuous batching in one long paragraph.' }];
  const s1 = await chatStream(turn1, { max_tokens: 70, ignore_eos: true, seed: 2 });
  assert.equal(s1.finish, 'length');
  assert.equal(s1.completionTokens, 70);
  const r2 = await chat([...turn1, { role: 'assistant', content: s1.content }, { role: 'user', content: 'Shorter, please.' }], { max_tokens: 1 });
  assert.equal(r2.usage.prompt_tokens_details?.cached_tokens, floor16(s1.promptTokens + 70 - 1));
});
