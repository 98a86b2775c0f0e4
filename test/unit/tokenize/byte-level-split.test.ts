import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ByteLevelBpeTokenizer, byteLevelAlphabet } from '../../../src/tokenize/byte-level-bpe.ts';

// The byte-level tokenizer's pre-tokenizer levels ("Isolated" splits): every match, and every gap between
// matches, is a piece for the next level. splitAt finds a match at its cursor with a sticky test() and falls back
// to a global exec() for gaps and empty matches; these cases compare it with the matchAll() walk below.

const alphabet = byteLevelAlphabet();
/** Merges that show where pieces were cut: "ab", "12" and "  " merge only inside one piece. */
const MERGED = ['ab', '12', 'ĠĠ'];

function tokenizer(splits: RegExp[]): ByteLevelBpeTokenizer {
  const vocab = [...alphabet, ...MERGED];
  const vocabIds = new Map(vocab.map((t, i) => [t, i]));
  const merges = MERGED.map((m, i): [number, number, number] => [vocabIds.get(m[0]!)!, vocabIds.get(m[1]!)!, 256 + i]);
  return new ByteLevelBpeTokenizer({
    name: 'synthetic', plan: { splits, normalizer: 'none' }, vocab, vocabIds, merges, ignoreMerges: false,
    addedTokens: [], bosId: null, specialTokens: {}, segmentCut: null,
  });
}

/**
 * The pieces of `text` under `splits`, by matchAll() alone (matches and gaps, level by level; after an empty match
 * it steps one character, a whole surrogate pair, on).
 */
function referencePieces(text: string, splits: RegExp[], level = 0): string[] {
  if (level === splits.length) return [text];
  const re = new RegExp(splits[level]!.source, 'gu');
  const out: string[] = [];
  let last = 0;
  for (const m of text.matchAll(re)) {
    if (m.index > last) out.push(...referencePieces(text.slice(last, m.index), splits, level + 1));
    out.push(...referencePieces(m[0], splits, level + 1));
    last = m.index + m[0].length;
  }
  if (last < text.length) out.push(...referencePieces(text.slice(last), splits, level + 1));
  return out;
}

const whole = tokenizer([]);
const texts = ['ab12 ab  12ab', '  ab\u{1F600}12  x', 'a\u{1F600}b', '', 'abab1212', ' \u{1F600}\u{1F600} ab ', '12 12  121'];
const plans: Array<[string, RegExp[]]> = [
  ['a pattern that takes every character', [/\p{L}+|\p{N}+|\s+|[^\s\p{L}\p{N}]+/gu]],
  ['a pattern that leaves gaps', [/\p{N}+/gu]],
  ['a pattern that can match empty', [/b*/gu]],
  ['two levels', [/\s+/gu, /\p{L}/gu]],
  ['an empty match beside a surrogate pair', [/(?:\u{1F600})*/gu]],
];

for (const [name, splits] of plans) {
  void test(`splitAt: ${name} cuts where exec() alone cuts`, () => {
    const t = tokenizer(splits);
    for (const text of texts) {
      const want = referencePieces(text, splits).flatMap((p) => [...whole.encodeOrdinary(p)]);
      assert.deepEqual([...t.encodeOrdinary(text)], want, JSON.stringify(text));
      // Warm: the pieces now come from the piece cache.
      assert.deepEqual([...t.encodeOrdinary(text)], want, `warm ${JSON.stringify(text)}`);
    }
  });
}

void test('the merges see the cuts (the cases above could otherwise pass whatever the split)', () => {
  assert.deepEqual([...whole.encodeOrdinary('ab')], [256]);
  assert.deepEqual([...tokenizer([/a/gu]).encodeOrdinary('ab')], [alphabet.indexOf('a'), alphabet.indexOf('b')]);
});
