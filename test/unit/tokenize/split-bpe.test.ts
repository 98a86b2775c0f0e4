import { test } from 'node:test';
import assert from 'node:assert/strict';
import { getTiktokenTokenizer, getTokenizer } from '../../../src/tokenize/tokenizer.ts';
import { SplitBpeTokenizer } from '../../../src/tokenize/split-bpe.ts';
import { corpus, randomText, seededRandom } from './corpus.ts';

// The split+cache tokenizer must give tiktoken's ids exactly, including where tiktoken and the JS reference
// disagree (U+0085, U+FEFF, the long s folding into the 's contraction).
const extraFragments = ['\u0085', '\ufeff', "'ſ", "'ſ'S", '\u180e', '\u2029\u2029', ' \u0085x'];

for (const name of ['llama3', 'cl100k_base'] as const) {
  const fast = getTokenizer(name);
  const exact = getTiktokenTokenizer(name);

  void test(`${name}: split+cache == tiktoken on the corpus, with and without special parsing`, () => {
    for (const { name: entry, text } of corpus) {
      assert.deepEqual(fast.encodeWithSpecials(text), exact.encodeWithSpecials(text), entry);
      assert.deepEqual(fast.encodeOrdinary(text), exact.encodeOrdinary(text), entry);
    }
  });

  void test(`${name}: split+cache == tiktoken on 3,000 seeded random strings, cold and warm`, () => {
    const random = seededRandom(name.length * 7919);
    for (let i = 0; i < 3000; i++) {
      let text = randomText(random, 30);
      if (random() < 0.3) text += extraFragments[Math.floor(random() * extraFragments.length)] as string;
      const want = exact.encodeWithSpecials(text);
      assert.deepEqual(fast.encodeWithSpecials(text), want, JSON.stringify(text));
      assert.deepEqual(fast.encodeWithSpecials(text), want, `warm ${JSON.stringify(text)}`);
    }
  });
}

void test('pieces longer than the cache limit and long whitespace runs are exact', () => {
  const fast = getTokenizer('llama3');
  const exact = getTiktokenTokenizer('llama3');
  for (const text of ['x'.repeat(5000), ' '.repeat(3000) + 'y', 'a\n'.repeat(2000), 'A'.repeat(70) + "'S", '1'.repeat(100)]) {
    assert.deepEqual(fast.encodeOrdinary(text), exact.encodeOrdinary(text));
  }
});

void test('the piece cache stays exact across generation swaps (more distinct pieces than one generation)', () => {
  const fast = getTokenizer('llama3');
  const exact = getTiktokenTokenizer('llama3');
  const random = seededRandom(99);
  const words: string[] = [];
  for (let i = 0; i < 80000; i++) words.push(` w${Math.floor(random() * 1e9).toString(36)}`);
  const text = words.join('');
  assert.deepEqual(fast.encodeOrdinary(text), exact.encodeOrdinary(text));
  assert.deepEqual(fast.encodeOrdinary(text.slice(0, 20000)), exact.encodeOrdinary(text.slice(0, 20000)));
});

void test('a stop callback that fires aborts a long encode with an AbortError', () => {
  const fast = getTokenizer('llama3');
  let polls = 0;
  assert.throws(() => fast.encodeWithSpecials('word '.repeat(20000), () => ++polls >= 2), { name: 'AbortError' });
  assert.equal(polls, 2);
  // Short inputs finish before the first poll.
  assert.deepEqual(fast.encodeWithSpecials('word '.repeat(10), () => true), fast.encodeWithSpecials('word '.repeat(10)));
});

void test('a split pattern that leaves characters out skips them, as a global search does', () => {
  // The Llama 3 pattern starts a piece at every character; a narrower pattern leaves gaps, which the sticky walk
  // must step over to the next piece rather than stop at.
  const exact = getTiktokenTokenizer('llama3');
  const lettersOnly = new SplitBpeTokenizer(exact, /\p{L}+/gu, {});
  const text = 'alpha, 42 beta!! gamma';
  const want = ['alpha', 'beta', 'gamma'].flatMap((w) => [...exact.encodeOrdinary(w)]);
  assert.deepEqual([...lettersOnly.encodeOrdinary(text)], want);
  assert.deepEqual([...lettersOnly.encodeOrdinary('...')], []);
});
