// The mock's output length and text rules: exact with ignore_eos, deterministic per seed, capped by max_tokens.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MAX_NATURAL_TOKENS, MIN_NATURAL_TOKENS, fullText, planOutput, tokenText } from '../../mock-replica/output-text.ts';

void test('ignore_eos generates exactly max_tokens and finishes with length', () => {
  for (const max of [1, 7, 4096]) assert.deepEqual([planOutput(max, true, 123, 0).outputTokens, planOutput(max, true, 123, 0).finishReason], [max, 'length']);
});

void test('without ignore_eos the length is a deterministic function of the seeds, within bounds and at most max_tokens', () => {
  const lengths = new Set<number>();
  for (let seed = 0; seed < 500; seed++) {
    const a = planOutput(10_000, false, seed, 0);
    assert.deepEqual(a, planOutput(10_000, false, seed, 0));
    assert.ok(a.outputTokens >= MIN_NATURAL_TOKENS && a.outputTokens <= MAX_NATURAL_TOKENS);
    assert.equal(a.finishReason, 'stop');
    lengths.add(a.outputTokens);
    const capped = planOutput(20, false, seed, 0);
    assert.ok(capped.outputTokens <= 20);
    assert.equal(capped.finishReason, capped.outputTokens === 20 ? 'length' : 'stop');
  }
  assert.ok(lengths.size > 100, 'lengths spread out');
  assert.notDeepEqual(planOutput(10_000, false, 1, 0), planOutput(10_000, false, 1, 1), 'the replica seed changes the output');
});

void test('a naturally stopped output ends with a period; the text is the concatenation of the token texts', () => {
  const plan = planOutput(10_000, false, 34, 7);
  assert.equal(tokenText(plan, plan.outputTokens - 1), '.');
  let joined = '';
  for (let i = 0; i < plan.outputTokens; i++) joined += tokenText(plan, i);
  assert.equal(fullText(plan, plan.outputTokens), joined);
  for (let i = 0; i < plan.outputTokens - 1; i++) assert.match(tokenText(plan, i), /^ [a-z]+$/);
});
