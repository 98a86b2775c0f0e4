// Shared test inputs for test/unit/tokenize: the fixture corpus and a seeded random-text generator.
import { readFileSync } from 'node:fs';

export interface CorpusEntry {
  name: string;
  text: string;
}

export const corpus: CorpusEntry[] = JSON.parse(
  readFileSync(new URL('../../fixtures/tokenizer/corpus.json', import.meta.url), 'utf8'),
) as CorpusEntry[];

/** Deterministic LCG in [0, 1). */
export function seededRandom(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

/**
 * Fragments that exercise every branch of the Llama 3 split regex: contractions in both cases, letters
 * of several scripts, digit runs, punctuation runs, every kind of whitespace, emoji with joiners and
 * modifiers, combining marks, special-token text and fragments of it. U+0085 and U+FEFF are left out on
 * purpose: see tokenizer.test.ts "known divergence".
 */
const fragments = [
  ' ', '  ', '\n', '\r\n', '\r', '\t', '\u000b', '\u000c', '\u00a0', '\u2028', '\u3000', '\u200b', "'s", "'T", "'re",
  "'VE", "'m", "'ll", "'D", "'", 'a', 'Z', 'hello', 'World', 'é', 'ß', 'Я', 'ω', '中', '文', 'の', 'ह', 'ي', '1', '22',
  '333', '4444', '٣', '½', '!', '?', '.', ',', '-', '_', '(', ')', '{', '}', '"', '#', '$', '@', '\\', '/', '`', '👍',
  '🏽', '\u200d', '🇫', '²', '\u0301', '<|eot_id|>', '<|begin_of_text|>', '<|', '|>', 'eot_id', '<|reserved_special_token_9|>',
];

export function randomText(random: () => number, maxFragments: number): string {
  const n = 1 + Math.floor(random() * maxFragments);
  let s = '';
  for (let i = 0; i < n; i++) s += fragments[Math.floor(random() * fragments.length)] as string;
  return s;
}
