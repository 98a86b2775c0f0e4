import { test } from 'node:test';
import assert from 'node:assert/strict';
import { initBlockHasher } from '../../../src/tokenize/block-hash.ts';
import { CachedPromptEncoder } from '../../../src/tokenize/cached-prompt-encoder.ts';
import { PromptTokenizer } from '../../../src/tokenize/prompt-tokenizer.ts';
import { chatPromptTokens } from '../../../src/tokenize/prompt.ts';
import { getTokenizer } from '../../../src/tokenize/tokenizer.ts';
import type { PromptWork } from '../../../src/tokenize/types.ts';
import { WARM_PROMPTS, warmPromptPath, warmPromptText } from '../../../src/tokenize/warm-code.ts';
import { corpus } from './corpus.ts';

const LLAMA = { tokenizer: 'llama3', template: 'llama3.1' } as const;

void test('every warm-up prompt is distinct and about 1,500 tokens, so each one runs the whole uncached path', () => {
  const texts = Array.from({ length: WARM_PROMPTS }, (_, i) => warmPromptText(i));
  assert.equal(new Set(texts).size, WARM_PROMPTS);
  const tk = getTokenizer('llama3');
  for (const text of texts) {
    const n = chatPromptTokens(tk, 'llama3.1', [{ role: 'user', content: text }]).length;
    assert.ok(n > 1_000 && n < 2_500, `${n} tokens`);
  }
});

void test('warming the thread changes no prompt\'s ids or block hashes', async () => {
  await initBlockHasher();
  const work = (text: string): PromptWork => ({ ...LLAMA, blockSize: 16, kind: 'chat', messages: [{ role: 'user', content: text }], tools: null, adapter: null });
  // Words the warm-up uses, next to the corpus' scripts: their pieces are in the thread's piece cache after it.
  const texts = [...corpus.map((c) => c.text), warmPromptText(WARM_PROMPTS + 3)];
  const before = texts.map((t) => new CachedPromptEncoder(1 << 20).encode(work(t)));
  warmPromptPath([LLAMA, { tokenizer: 'cl100k_base', template: 'chatml' }]);
  const after = texts.map((t) => new CachedPromptEncoder(1 << 20).encode(work(t)));
  for (let i = 0; i < texts.length; i++) {
    assert.deepEqual(after[i]!.tokens, before[i]!.tokens);
    assert.deepEqual(after[i]!.blockHashes, before[i]!.blockHashes);
  }
});

void test('the warm-up leaves the request caches empty: the thread\'s encoder has cached nothing after setup', async () => {
  let used: (() => number) | null = null;
  const tk = await PromptTokenizer.create({ threads: 0, inline_max_chars: 1024, cache_bytes: 8 << 20 }, {
    tokenizers: ['llama3'], warm: [LLAMA], trackCache: (bytes) => { used = bytes; },
  });
  assert.equal(used!(), 0);
  await tk.close();
});
