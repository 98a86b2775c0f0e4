// Golden bytes of the mock's responses over real HTTP: chat and completions, streamed and not, with and
// without include_usage, a prefix-cache hit (prompt_tokens_details), and the error bodies. `created` is
// normalised to 0; ids come from X-Request-Id. Regenerate with UPDATE_GOLDEN=1 after checking the diff
// against docs/vllm-facts.md ("Wire format", "Usage and cached tokens", "Error bodies and statuses").
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { afterEach, beforeEach, test } from 'node:test';
import { startMockReplica, type MockReplica } from '../../helpers/mock-replicas.ts';

const FIXTURES = new URL('../../fixtures/sse/', import.meta.url);
const UPDATE = process.env.UPDATE_GOLDEN === '1';
const MODEL = 'meta-llama/Llama-3.1-8B-Instruct';
const MESSAGES = [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Name three colours.' }];

// A fresh replica per case, so that no case sees another's prefix-cache blocks.
let replica: MockReplica;
beforeEach(async () => {
  replica = await startMockReplica({ profile: 'tiny', seed: 7, loras: ['acme-sql'], maxLoras: 2 });
});
afterEach(() => replica.close());

async function call(path: string, body: unknown, requestId: string): Promise<{ status: number; contentType: string; text: string }> {
  const res = await fetch(replica.url + path, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-request-id': requestId },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = (await res.text()).replace(/"created":\d+/g, '"created":0');
  return { status: res.status, contentType: res.headers.get('content-type') ?? '', text };
}

function golden(name: string, actual: string): void {
  const file = new URL(name, FIXTURES);
  if (UPDATE) writeFileSync(file, actual);
  assert.equal(actual, readFileSync(file, 'utf8'), `bytes differ from test/fixtures/sse/${name}`);
}

const cases: Array<{ name: string; path: string; body: Record<string, unknown>; stream: boolean }> = [
  { name: 'chat-stream.txt', path: '/v1/chat/completions', body: { model: MODEL, messages: MESSAGES, max_tokens: 5, seed: 1, stream: true }, stream: true },
  { name: 'chat-stream-usage.txt', path: '/v1/chat/completions', body: { model: MODEL, messages: MESSAGES, max_completion_tokens: 5, seed: 1, stream: true, stream_options: { include_usage: true } }, stream: true },
  { name: 'chat-stream-natural-stop.txt', path: '/v1/chat/completions', body: { messages: MESSAGES, max_tokens: 100, seed: 34, stream: true, stream_options: { include_usage: true } }, stream: true },
  { name: 'chat-stream-continuous-usage.txt', path: '/v1/chat/completions', body: { model: 'acme-sql', messages: MESSAGES, max_tokens: 3, seed: 1, stream: true, stream_options: { include_usage: true, continuous_usage_stats: true } }, stream: true },
  { name: 'chat.json', path: '/v1/chat/completions', body: { model: MODEL, messages: MESSAGES, max_tokens: 5, seed: 1 }, stream: false },
  { name: 'completion-stream.txt', path: '/v1/completions', body: { model: MODEL, prompt: 'Once upon a time', max_tokens: 4, seed: 2, stream: true }, stream: true },
  { name: 'completion-stream-usage.txt', path: '/v1/completions', body: { model: MODEL, prompt: 'Once upon a time', max_tokens: 4, seed: 2, stream: true, stream_options: { include_usage: true } }, stream: true },
  { name: 'completion.json', path: '/v1/completions', body: { model: MODEL, prompt: 'Once upon a time', max_tokens: 4, seed: 2, ignore_eos: true }, stream: false },
];

for (const c of cases) {
  void test(`${c.name}: exact bytes and content type`, async () => {
    const r = await call(c.path, c.body, 'golden');
    assert.equal(r.status, 200);
    assert.equal(r.contentType, c.stream ? 'text/event-stream; charset=utf-8' : 'application/json');
    golden(c.name, r.text);
  });
}

void test('a repeated 200-token prompt reports cached_tokens as full blocks in the usage chunk and the JSON body', async () => {
  const long = [{ role: 'user', content: 'lorem ipsum dolor sit amet '.repeat(40) }];
  await call('/v1/chat/completions', { messages: long, max_tokens: 2, seed: 5 }, 'warm');
  const streamed = await call('/v1/chat/completions', { messages: long, max_tokens: 2, seed: 5, stream: true, stream_options: { include_usage: true } }, 'hit');
  golden('chat-stream-cached.txt', streamed.text);
  const full = await call('/v1/chat/completions', { messages: long, max_tokens: 2, seed: 5 }, 'hit');
  const usage = (JSON.parse(full.text) as { usage: { prompt_tokens: number; prompt_tokens_details: { cached_tokens: number } } }).usage;
  assert.equal(usage.prompt_tokens_details.cached_tokens % 16, 0);
  assert.ok(usage.prompt_tokens_details.cached_tokens >= usage.prompt_tokens - 16 && usage.prompt_tokens_details.cached_tokens < usage.prompt_tokens);
});

void test('error bodies: unknown model 404, context too long 400, max_tokens too large 400, bad JSON 400', async () => {
  const notFound = await call('/v1/chat/completions', { model: 'nope', messages: MESSAGES }, 'e1');
  assert.equal(notFound.status, 404);
  const tooLong = await call('/v1/completions', { prompt: 'word '.repeat(3000) }, 'e2');
  assert.equal(tooLong.status, 400);
  const tooMany = await call('/v1/completions', { prompt: 'hello', max_tokens: 5000 }, 'e3');
  assert.equal(tooMany.status, 400);
  const badJson = await call('/v1/chat/completions', '{"messages": [', 'e4');
  assert.equal(badJson.status, 400);
  golden('errors.txt', [notFound.text, tooLong.text, tooMany.text, badJson.text].join('\n') + '\n');
});
