import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';
import reference from 'llama3-tokenizer-js';
import { tiktokenRanksText } from '../../../src/tokenize/data/byte-level.ts';
import { LLAMA3_ORDINARY_VOCAB_SIZE, llama3SpecialTokens } from '../../../src/tokenize/tokenizer.ts';

void test('the committed Llama 3 ranks file is the reference vocabulary, id for id', () => {
  const committed = gunzipSync(readFileSync(new URL('../../../src/tokenize/data/llama3.tiktoken.gz', import.meta.url))).toString('latin1');
  assert.equal(committed, tiktokenRanksText(reference.vocabById, LLAMA3_ORDINARY_VOCAB_SIZE));
});

void test('the 256 special tokens carry the reference names and ids 128000-128255', () => {
  const specials = llama3SpecialTokens();
  assert.equal(Object.keys(specials).length, 256);
  for (const [text, id] of Object.entries(specials)) assert.equal(reference.getSpecialTokenId(text), id, text);
});
