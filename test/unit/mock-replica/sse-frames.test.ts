// Frame builders not reached by the golden HTTP tests: the mid-stream error frame and usage edge cases.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { StreamFrames, errorFrame, fullResponseBody } from '../../mock-replica/sse-frames.ts';

void test('an error after the 200 is one error frame followed by [DONE], with the numeric code', () => {
  assert.equal(
    errorFrame(500, 'InternalServerError', 'boom'),
    'data: {"error":{"message":"boom","type":"InternalServerError","param":null,"code":500}}\n\ndata: [DONE]\n\n',
  );
});

void test('usage chunk: prompt_tokens_details only when cached_tokens > 0; token text is JSON-escaped', () => {
  const f = new StreamFrames('chat', 'chatcmpl-x', 1, 'm', false, 10);
  assert.equal(f.usage({ promptTokens: 10, completionTokens: 2, cachedTokens: 0 }), 'data: {"id":"chatcmpl-x","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":10,"total_tokens":12,"completion_tokens":2}}\n\n');
  assert.match(f.usage({ promptTokens: 40, completionTokens: 2, cachedTokens: 32 }), /"completion_tokens":2,"prompt_tokens_details":\{"cached_tokens":32\}\}\}\n\n$/);
  assert.match(f.token('a "q"\n', 1), /"delta":\{"content":"a \\"q\\"\\n"\}/);
});

void test('non-streamed completions body with a cache hit carries the details object', () => {
  const body = JSON.parse(fullResponseBody({ kind: 'completion', id: 'cmpl-x', createdSeconds: 1, model: 'm', text: ' a', finishReason: 'stop', usage: { promptTokens: 40, completionTokens: 1, cachedTokens: 32 } })) as { usage: unknown; kv_transfer_params: null };
  assert.deepEqual(body.usage, { prompt_tokens: 40, total_tokens: 41, completion_tokens: 1, prompt_tokens_details: { cached_tokens: 32 } });
  assert.equal(body.kv_transfer_params, null);
});
