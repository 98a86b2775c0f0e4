// Request validation of the mock, with vLLM's messages for the cases a gateway relays.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseCompletionRequest } from '../../mock-replica/completion-request.ts';
import { VllmError } from '../../mock-replica/vllm-errors.ts';

function error(kind: 'chat' | 'completion', body: unknown): VllmError {
  const r = parseCompletionRequest(kind, typeof body === 'string' ? body : JSON.stringify(body));
  assert.ok(r instanceof VllmError, `expected an error for ${JSON.stringify(body)}`);
  return r;
}

void test('chat: max_completion_tokens wins over max_tokens; stream options are read', () => {
  const r = parseCompletionRequest('chat', JSON.stringify({ messages: [{ role: 'user', content: 'x' }], max_tokens: 9, max_completion_tokens: 3, stream: true, stream_options: { include_usage: true, continuous_usage_stats: true }, seed: 4, ignore_eos: true }));
  assert.ok(!(r instanceof VllmError));
  assert.deepEqual([r.maxTokens, r.stream, r.includeUsage, r.continuousUsage, r.seed, r.ignoreEos, r.model], [3, true, true, true, 4, true, '']);
});

void test('completions: string, token ids and a one-element list are accepted', () => {
  for (const prompt of ['hi', [1, 2, 3], ['hi'], [[1, 2]]]) {
    const r = parseCompletionRequest('completion', JSON.stringify({ prompt }));
    assert.ok(!(r instanceof VllmError), JSON.stringify(prompt));
  }
});

void test('400s: bad JSON, missing messages or prompt, stream_options without stream, max_tokens < 1, wrong types', () => {
  assert.match(error('chat', '{').message, /json_invalid/);
  assert.match(error('chat', {}).message, /'loc': \('body', 'messages'\).*Field required/);
  assert.match(error('completion', {}).message, /'loc': \('body', 'prompt'\)/);
  assert.equal(error('chat', { messages: [], stream_options: { include_usage: true } }).message, 'Stream options can only be defined when `stream=True`.');
  assert.equal(error('completion', { prompt: 'x', max_tokens: 0 }).message, 'max_tokens must be at least 1, got 0.');
  assert.match(error('completion', { prompt: 'x', max_tokens: 'many' }).message, /int_type/);
  assert.match(error('chat', { messages: 'hi' }).message, /list_type/);
  for (const e of [error('chat', '{'), error('completion', { prompt: 'x', n: 2 })]) assert.equal(e.status, 400);
});
