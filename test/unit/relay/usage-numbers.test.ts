import { test } from 'node:test';
import assert from 'node:assert/strict';
import { tokenCount, usageNumbers } from '../../../src/relay/usage-numbers.ts';
import { jsonFigures } from '../../../src/relay/json-figures.ts';

test('only finite non-negative numbers count as tokens', () => {
  assert.equal(tokenCount(7), 7);
  assert.equal(tokenCount(7.9), 7);
  assert.equal(tokenCount(0), 0);
  for (const bad of ['7', true, null, undefined, -1, Number.NaN, Infinity, {}, [3]]) assert.equal(tokenCount(bad), null, String(bad));
});

test('a usage object without a usable completion count is no usage at all; other bad counts read 0', () => {
  assert.deepEqual(usageNumbers({ prompt_tokens: 21, completion_tokens: 16, prompt_tokens_details: { cached_tokens: 16 } }), { promptTokens: 21, completionTokens: 16, cachedTokens: 16 });
  assert.deepEqual(usageNumbers({ prompt_tokens: '21', completion_tokens: 16, prompt_tokens_details: null }), { promptTokens: 0, completionTokens: 16, cachedTokens: 0 });
  assert.deepEqual(usageNumbers({ prompt_tokens: 21, completion_tokens: 16, prompt_tokens_details: { cached_tokens: -4 } }), { promptTokens: 21, completionTokens: 16, cachedTokens: 0 });
  assert.equal(usageNumbers({ prompt_tokens: 21, completion_tokens: '16' }), null);
  assert.equal(usageNumbers({ prompt_tokens: 21 }), null);
  assert.equal(usageNumbers(null), null);
  assert.equal(usageNumbers('usage'), null);
});

test('a non-streaming body with string counts bills no replica-reported tokens', () => {
  const f = jsonFigures(Buffer.from('{"choices":[{"finish_reason":"stop"}],"usage":{"prompt_tokens":"5","completion_tokens":"7"}}'));
  assert.deepEqual(f, { promptTokens: 0, completionTokens: 0, cachedTokens: 0, finishReason: 'stop' });
});
