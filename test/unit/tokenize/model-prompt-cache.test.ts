import { before, test } from 'node:test';
import assert from 'node:assert/strict';
import { blockHashes, initBlockHasher } from '../../../src/tokenize/block-hash.ts';
import { CachedPromptEncoder } from '../../../src/tokenize/cached-prompt-encoder.ts';
import { chatPromptTokens } from '../../../src/tokenize/prompt.ts';
import { getTokenizer } from '../../../src/tokenize/tokenizer.ts';
import type { ChatMessage, PromptWork } from '../../../src/tokenize/types.ts';
import { modelDir } from '../../helpers/model-tokenizers.ts';

before(async () => {
  await initBlockHasher();
});

const system = Array.from({ length: 80 }, (_, i) => `Rule ${i}: 回答は簡潔に — be brief, cite 📚 sources.`).join('\n');
const chats: ChatMessage[][] = [
  [{ role: 'system', content: system }, { role: 'user', content: 'First question about café\u0301 prices?' }],
  [{ role: 'system', content: system }, { role: 'user', content: 'Second question, 二番目の質問.' }],
  [{ role: 'system', content: system }, { role: 'user', content: 'Second question, 二番目の質問.' }, { role: 'assistant', content: 'An answer of a few words.' }, { role: 'user', content: 'A follow-up 🙂' }],
];

const setups: Array<{ label: string; tokenizer: string; template: string }> = [
  { label: 'built-in llama3 + llama3.1', tokenizer: 'llama3', template: 'llama3.1' },
  { label: 'Qwen3 directory + its Jinja template', tokenizer: modelDir('qwen3'), template: `${modelDir('qwen3')}/tokenizer_config.json` },
  // Its template's first segment is <|begin_of_text|> alone: the system prompt is the third segment.
  { label: 'Llama 3 directory + its Jinja template', tokenizer: modelDir('llama3_1'), template: `${modelDir('llama3_1')}/tokenizer_config.json` },
  { label: 'DeepSeek V3 directory + its Jinja template', tokenizer: modelDir('deepseek_v3'), template: `${modelDir('deepseek_v3')}/tokenizer_config.json` },
];

for (const s of setups) {
  void test(`${s.label}: a shared system prompt and an earlier turn are hashed once, and the hashes equal the uncached ones`, () => {
    const encoder = new CachedPromptEncoder(16 << 20);
    const work = (messages: ChatMessage[]): PromptWork => ({ tokenizer: s.tokenizer, template: s.template, blockSize: 16, kind: 'chat', messages, adapter: null });
    const systemBlocks = Math.floor(chatPromptTokens(getTokenizer(s.tokenizer), s.template, [{ role: 'system', content: system }]).length / 16);
    let reused = 0;
    for (const [i, messages] of chats.entries()) {
      const got = encoder.measure(work(messages));
      const tokens = chatPromptTokens(getTokenizer(s.tokenizer), s.template, messages);
      assert.equal(got.promptTokens, tokens.length);
      assert.deepEqual(Array.from(got.blockHashes), Array.from(blockHashes(tokens, 16, null)), `request ${i}`);
      const now = encoder.reusedBlocks - reused;
      reused = encoder.reusedBlocks;
      if (i === 0) assert.equal(now, 0);
      // The second request shares the system prompt; the third extends the second's conversation.
      else assert.ok(now >= systemBlocks - 2, `request ${i} reused ${now} blocks of a ${systemBlocks}-block system prompt`);
    }
  });
}
