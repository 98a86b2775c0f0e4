import { test } from 'node:test';
import assert from 'node:assert/strict';
import reference from 'llama3-tokenizer-js';
import { renderChat } from '../../../src/tokenize/chat-template.ts';
import type { ChatMessage } from '../../../src/tokenize/types.ts';
import { chatPromptTokens, completionPromptTokens } from '../../../src/tokenize/prompt.ts';
import { getTokenizer } from '../../../src/tokenize/tokenizer.ts';
import { corpus } from './corpus.ts';

const llama = getTokenizer('llama3');
const texts = corpus.map((c) => c.text);

/** Multi-turn chats over the corpus, including messages that share prefixes and special-token text. */
function chats(): ChatMessage[][] {
  const out: ChatMessage[][] = [];
  for (let i = 0; i < texts.length; i++) {
    const a = texts[i] as string;
    const b = texts[(i + 7) % texts.length] as string;
    out.push([{ role: 'user', content: a }]);
    out.push([{ role: 'system', content: b }, { role: 'user', content: a }, { role: 'assistant', content: b }, { role: 'user', content: `${a} and more` }]);
    out.push([{ role: 'system', content: a }, { role: 'user', content: a.slice(0, Math.floor(a.length / 2)) }]);
  }
  return out;
}

void test('chat prompt tokens == the reference tokenizing the whole rendered prompt (llama3.1)', () => {
  for (const messages of chats()) {
    const text = renderChat('llama3.1', messages);
    assert.deepEqual(Array.from(chatPromptTokens(llama, 'llama3.1', messages)), reference.encode(text, { bos: false, eos: false }));
  }
});

void test('chat prompt tokens == tokenizing the joined text in one call (chatml on cl100k_base and o200k_base)', () => {
  for (const name of ['cl100k_base', 'o200k_base'] as const) {
    const tok = getTokenizer(name);
    for (const messages of chats()) {
      assert.deepEqual(chatPromptTokens(tok, 'chatml', messages), tok.encodeWithSpecials(renderChat('chatml', messages)));
    }
  }
});

void test('a Llama 3.1 chat prompt starts with exactly one BOS and ends with the assistant header', () => {
  const ids = Array.from(chatPromptTokens(llama, 'llama3.1', [{ role: 'user', content: 'Hello!' }]));
  assert.equal(ids[0], 128000);
  assert.equal(ids.filter((id) => id === 128000).length, 1);
  assert.deepEqual(ids.slice(-4), [128006, 78191, 128007, 271]);
});

void test('completions: a string gets BOS first (add_special_tokens=True), specials parsed', () => {
  for (const text of texts) {
    assert.deepEqual(Array.from(completionPromptTokens(llama, text)), reference.encode(text, { bos: true, eos: false }));
  }
  // A prompt that already starts with BOS text gets two, as vLLM does.
  assert.deepEqual(Array.from(completionPromptTokens(llama, '<|begin_of_text|>Hi')), [128000, 128000, 13347]);
});

void test('completions: a token-id array is taken as is; OpenAI encodings add no BOS', () => {
  assert.deepEqual(Array.from(completionPromptTokens(llama, [1, 2, 3])), [1, 2, 3]);
  assert.deepEqual(Array.from(completionPromptTokens(llama, [])), []);
  const cl = getTokenizer('cl100k_base');
  assert.deepEqual(Array.from(completionPromptTokens(cl, 'hello world')), [15339, 1917]);
});
