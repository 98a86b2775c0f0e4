// The mock's output length and text rules: exact with ignore_eos, deterministic per seed, capped by max_tokens;
// its words are single tokens whose text re-tokenizes to the ids the mock samples.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { getTokenizer } from '../../../src/tokenize/tokenizer.ts';
import { MAX_NATURAL_TOKENS, MIN_NATURAL_TOKENS, OUTPUT_WORDS, fullText, planOutput, tokenText } from '../../mock-replica/output-text.ts';
import { outputTokenIds } from '../../mock-replica/reply-hashes.ts';

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

void test('a naturally stopped output ends with a period, then EOS with empty text; the text is the concatenation of the token texts', () => {
  const plan = planOutput(10_000, false, 34, 7);
  assert.equal(tokenText(plan, plan.outputTokens - 1), '');
  assert.equal(tokenText(plan, plan.outputTokens - 2), '.');
  let joined = '';
  for (let i = 0; i < plan.outputTokens; i++) joined += tokenText(plan, i);
  assert.equal(fullText(plan, plan.outputTokens), joined);
  for (let i = 0; i < plan.outputTokens - 2; i++) assert.match(tokenText(plan, i), /^ [a-z]+$/);
});

void test('a chat reply starts with a capitalised word without a leading space; the others keep theirs', () => {
  const firsts = new Set<string>();
  for (let seed = 0; seed < 200; seed++) {
    const plan = planOutput(30, true, seed, 0, true);
    assert.match(tokenText(plan, 0), /^[A-Z][a-z]*$/);
    firsts.add(tokenText(plan, 0));
    for (let i = 1; i < 30; i++) assert.match(tokenText(plan, i), /^ [a-z]+$/);
    assert.match(tokenText(planOutput(30, true, seed, 0, false), 0), /^ [a-z]+$/, 'a completions output continues the prompt');
  }
  assert.ok(firsts.size > 20, 'first words spread out');
});

void test('every output word is one Llama 3 token, and a reply\'s text re-tokenizes to the ids sampled', () => {
  const tokenizer = getTokenizer('llama3');
  for (const word of OUTPUT_WORDS) assert.equal(tokenizer.encodeOrdinary(word).length, 1, JSON.stringify(word));
  for (let seed = 0; seed < 100; seed++) {
    for (const chat of [true, false]) {
      const plan = planOutput(10_000, seed % 3 === 0, seed, 3, chat);
      const ids = outputTokenIds(plan);
      const visible = plan.finishReason === 'stop' ? ids.subarray(0, -1) : ids;
      // In the next chat turn the reply follows the assistant header's "\n\n", in the same text run.
      const text = fullText(plan, plan.outputTokens);
      const inTurn = tokenizer.encodeWithSpecials(`<|start_header_id|>assistant<|end_header_id|>\n\n${text}<|eot_id|>`);
      assert.deepEqual(inTurn.subarray(4, 4 + visible.length), visible, `seed ${seed} chat ${chat}`);
      assert.deepEqual(tokenizer.encodeWithSpecials(text), visible);
    }
  }
});
