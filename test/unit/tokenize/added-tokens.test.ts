import { test } from 'node:test';
import assert from 'node:assert/strict';
import { AddedTokenMatcher } from '../../../src/tokenize/added-tokens.ts';

const all = (m: AddedTokenMatcher, text: string): Array<[number, number, string]> => {
  const out: Array<[number, number, string]> = [];
  for (let x = m.next(text, 0); x !== null; x = m.next(text, x.end)) out.push([x.start, x.end, x.token]);
  return out;
};

void test('leftmost, then longest at that position, as HF\'s added-token matcher', () => {
  const m = new AddedTokenMatcher([{ content: '\n' }, { content: '\n\n' }, { content: '<a>' }, { content: '<ab>' }, { content: 'b>' }]);
  assert.deepEqual(all(m, 'x\n\n\ny<ab>z<a>b>'), [[1, 3, '\n\n'], [3, 4, '\n'], [5, 9, '<ab>'], [10, 13, '<a>'], [13, 15, 'b>']]);
  // A first character that starts no token at that position is skipped.
  assert.deepEqual(all(m, '<x<a>'), [[2, 5, '<a>']]);
  assert.equal(m.next('plain text', 0), null);
});

void test('lstrip and rstrip tokens take the whitespace beside them (never before the previous match)', () => {
  const m = new AddedTokenMatcher([{ content: '<mask>', lstrip: true }, { content: '<r>', rstrip: true }]);
  assert.deepEqual(all(m, 'a  <mask> b<r> \n c'), [[1, 9, '<mask>'], [11, 17, '<r>']]);
  assert.deepEqual(all(m, '<r>  <mask>'), [[0, 5, '<r>'], [5, 11, '<mask>']]);
});

void test('tokens outside the BMP and sharing prefixes', () => {
  const m = new AddedTokenMatcher([{ content: '🙂' }, { content: '🙂🙂' }, { content: '<｜User｜>' }, { content: '<｜Us' }]);
  assert.deepEqual(all(m, 'x🙂🙂🙂<｜User｜><｜Usr'), [[1, 5, '🙂🙂'], [5, 7, '🙂'], [7, 15, '<｜User｜>'], [15, 19, '<｜Us']]);
});
