// The gateway's chat prompts against goldens from the reference, not the product: for every model with a
// shipped tokenizer directory, test/fixtures/goldens/prompts.json holds what Python's jinja2 renders as
// transformers does, the ids @lenml/tokenizers gives for it (Gemma 3's images expanded as vLLM expands them), and
// the 16-token block hashes a pure-Python xxhash64 chains over those ids (scripts/goldens/render-goldens.py,
// encode-goldens.ts; run by hand). Hard cases: reasoning turns with indented code, tool round trips and tool
// results, whitespace-significant and non-ASCII text, a long system prompt, images, continue_final_message,
// chat_template_kwargs; a template's raise_exception stays the template's error (a 400).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { before, test } from 'node:test';
import { initBlockHasher } from '../../../src/tokenize/block-hash.ts';
import { CachedPromptEncoder } from '../../../src/tokenize/cached-prompt-encoder.ts';
import { renderJinja } from '../../../src/tokenize/jinja-template.ts';
import { promptRefs } from '../../../src/tokenize/pool-refs.ts';
import { getTokenizer } from '../../../src/tokenize/tokenizer.ts';
import type { ChatMessage, ChatOptions, PromptWork } from '../../../src/tokenize/types.ts';

interface Golden {
  model: string;
  dir: string;
  template: string | null;
  name: string;
  messages: ChatMessage[];
  tools: unknown[] | null;
  options: { add_generation_prompt?: boolean; continue_final_message?: boolean; chat_template_kwargs?: Record<string, unknown> };
  text?: string;
  error?: 'raise' | 'python';
  message?: string;
  ids?: number[];
  block_hashes?: number[];
}

const root = new URL('../../../', import.meta.url);
const goldens = JSON.parse(readFileSync(new URL('test/fixtures/goldens/prompts.json', root), 'utf8')) as Golden[];
const abs = (path: string): string => fileURLToPath(new URL(path, root));

function work(g: Golden): PromptWork {
  const refs = promptRefs({ tokenizer: { path: abs(g.dir) }, chat_template: g.template === null ? 'auto' : abs(g.template) });
  const chat: ChatOptions = {
    addGenerationPrompt: g.options.add_generation_prompt, continueFinalMessage: g.options.continue_final_message,
    templateKwargs: g.options.chat_template_kwargs ?? null,
  };
  return { tokenizer: refs.tokenizer, template: refs.template, blockSize: 16, kind: 'chat', messages: g.messages, tools: g.tools ?? null, chat, adapter: null };
}

before(async () => {
  await initBlockHasher();
});

const encoder = new CachedPromptEncoder(64 * 1024 * 1024);

for (const g of goldens) {
  void test(`${g.model}: ${g.name}`, () => {
    const w = work(g);
    if (g.error !== undefined) {
      assert.equal(g.error, 'raise', 'every golden the reference refuses is a raise_exception');
      assert.throws(() => encoder.encode(w), (err: Error) => err.name === 'ChatTemplateError' && err.message === g.message);
      return;
    }
    const text = renderJinja(w.template, w.messages!, w.tools ?? null, getTokenizer(w.tokenizer), w.chat);
    assert.equal(text, g.text, 'rendered text');
    const { tokens, blockHashes } = encoder.encode(w);
    assert.deepEqual(Array.from(tokens), g.ids, 'token ids');
    assert.deepEqual(Array.from(blockHashes), g.block_hashes, 'block hashes');
    assert.equal(encoder.measure(w).estimated, null, 'an exact count, not an estimate');
  });
}

void test('the goldens cover every model with a shipped tokenizer directory and each hard case', () => {
  const models = new Set(goldens.map((g) => g.model));
  assert.deepEqual([...models].sort(), ['deepseek_v3', 'gemma3', 'gptoss', 'llama3_1', 'qwen3']);
  for (const name of ['reasoning turn with indented code', 'tool round trip', 'whitespace-significant text', 'long system prompt', 'multi-turn, non-ASCII and content parts']) {
    assert.equal(goldens.filter((g) => g.name === name).length, models.size, name);
  }
  assert.ok(goldens.some((g) => g.name === 'images' && (g.ids?.length ?? 0) > 512), 'Gemma 3 images expanded to 256 tokens each');
});
