import { test } from 'node:test';
import assert from 'node:assert/strict';
import { jsonFigures } from '../../../src/relay/json-figures.ts';

const body = (content: string, usage: unknown, finish: string | null = 'stop'): Buffer => Buffer.from(JSON.stringify({
  id: 'chatcmpl-1', object: 'chat.completion', created: 1, model: 'm',
  choices: [{ index: 0, message: { role: 'assistant', content }, logprobs: null, finish_reason: finish, stop_reason: null }],
  service_tier: null, usage, prompt_logprobs: null, kv_transfer_params: null,
}));

test('reads usage, cached tokens and finish_reason from a vLLM chat body', () => {
  assert.deepEqual(jsonFigures(body('hi', { prompt_tokens: 37, total_tokens: 42, completion_tokens: 5, prompt_tokens_details: { cached_tokens: 32 } })), {
    promptTokens: 37, completionTokens: 5, cachedTokens: 32, finishReason: 'stop',
  });
  assert.deepEqual(jsonFigures(body('hi', { prompt_tokens: 3, total_tokens: 4, completion_tokens: 1, prompt_tokens_details: null }, 'length')), {
    promptTokens: 3, completionTokens: 1, cachedTokens: 0, finishReason: 'length',
  });
});

test('text that looks like the keys inside the completion does not fool it', () => {
  const tricky = 'say "usage":{"prompt_tokens":999} and "finish_reason":"evil" {{{';
  assert.deepEqual(jsonFigures(body(tricky, { prompt_tokens: 7, total_tokens: 9, completion_tokens: 2 })), {
    promptTokens: 7, completionTokens: 2, cachedTokens: 0, finishReason: 'stop',
  });
});

test('a body without usage, or not JSON, yields zeros or null', () => {
  assert.deepEqual(jsonFigures(Buffer.from('{"choices":[{"finish_reason":null}]}')), { promptTokens: 0, completionTokens: 0, cachedTokens: 0, finishReason: null });
  assert.equal(jsonFigures(Buffer.from('not json')), null);
});

test('a completions body (text_completion) reads the same', () => {
  const b = Buffer.from(JSON.stringify({ id: 'cmpl-1', object: 'text_completion', choices: [{ index: 0, text: ' x', logprobs: null, finish_reason: 'length', stop_reason: null, prompt_logprobs: null }], usage: { prompt_tokens: 4, total_tokens: 9, completion_tokens: 5 }, kv_transfer_params: null }));
  assert.deepEqual(jsonFigures(b), { promptTokens: 4, completionTokens: 5, cachedTokens: 0, finishReason: 'length' });
});
