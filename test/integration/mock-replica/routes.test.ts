// The small routes of the mock over HTTP: /health, /version, /tokenize, content-type and method checks,
// uvicorn-like headers, and prompt token counts that match the gateway's tokenizer.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { chatPromptTokens } from '../../../src/tokenize/prompt.ts';
import { getTokenizer } from '../../../src/tokenize/tokenizer.ts';
import { startMockReplica, type MockReplica } from '../../helpers/mock-replicas.ts';
import { postJson } from './http-client.ts';

let replica: MockReplica;
before(async () => {
  replica = await startMockReplica({ profile: 'tiny' });
});
after(() => replica.close());

void test('/health is 200 with an empty body; /version names a vLLM version; server says uvicorn', async () => {
  const health = await fetch(`${replica.url}/health`);
  assert.equal(health.status, 200);
  assert.equal(await health.text(), '');
  assert.equal(health.headers.get('server'), 'uvicorn');
  assert.match(((await (await fetch(`${replica.url}/version`)).json()) as { version: string }).version, /^0\.\d+\.\d+$/);
});

void test('/tokenize and usage.prompt_tokens equal the gateway tokenizer\'s count for the same messages', async () => {
  const messages = [{ role: 'system', content: '  Be brief.  ' }, { role: 'user', content: 'Héllo 👋, what is 2+2?' }];
  const expected = chatPromptTokens(getTokenizer('llama3'), 'llama3.1', messages);
  const tok = JSON.parse((await postJson(replica.url, '/tokenize', { messages })).text) as { count: number; tokens: number[]; max_model_len: number };
  assert.equal(tok.count, expected.length);
  assert.deepEqual(tok.tokens, [...expected]);
  assert.equal(tok.max_model_len, 2048);
  const chat = JSON.parse((await postJson(replica.url, '/v1/chat/completions', { messages, max_tokens: 1 })).text) as { usage: { prompt_tokens: number } };
  assert.equal(chat.usage.prompt_tokens, expected.length);
});

void test('a POST without application/json is 415; a wrong method is 405; an unknown path is 404', async () => {
  const plain = await fetch(`${replica.url}/v1/chat/completions`, { method: 'POST', body: '{}', headers: { 'content-type': 'text/plain' } });
  assert.equal(plain.status, 415);
  assert.equal((await fetch(`${replica.url}/v1/chat/completions`)).status, 405);
  assert.equal((await fetch(`${replica.url}/nope`)).status, 404);
});

void test('request-level tools lengthen the prompt; a template error is a 400 BadRequestError, not a 500', async () => {
  const messages = [{ role: 'user', content: 'What is the weather?' }];
  const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather now', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
  const plain = JSON.parse((await postJson(replica.url, '/v1/chat/completions', { messages, max_tokens: 1 })).text) as { usage: { prompt_tokens: number } };
  const withTools = JSON.parse((await postJson(replica.url, '/v1/chat/completions', { messages, tools, max_tokens: 1 })).text) as { usage: { prompt_tokens: number } };
  assert.ok(withTools.usage.prompt_tokens > plain.usage.prompt_tokens + 20);
  const twoCalls = [{ role: 'user', content: 'x' }, { role: 'assistant', content: null, tool_calls: [
    { id: 'a', type: 'function', function: { name: 'f', arguments: '{}' } },
    { id: 'b', type: 'function', function: { name: 'g', arguments: '{}' } },
  ] }];
  const bad = await postJson(replica.url, '/v1/chat/completions', { messages: twoCalls, max_tokens: 1 });
  assert.equal(bad.status, 400);
  assert.equal((JSON.parse(bad.text) as { error: { type: string } }).error.type, 'BadRequestError');
});

void test('a token-id prompt outside the Llama 3 vocabulary is a 400', async () => {
  const r = await postJson(replica.url, '/v1/completions', { prompt: [1, 2, 200000], max_tokens: 1 });
  assert.equal(r.status, 400);
  assert.match(r.text, /Token id 200000 is out of vocabulary/);
  assert.equal((await postJson(replica.url, '/v1/completions', { prompt: [128000, 9906], max_tokens: 1 })).status, 200);
});
