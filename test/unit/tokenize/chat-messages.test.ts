// Content parts, tool calls and template options as vLLM passes them to a model's template, and the estimate
// a template the gateway cannot render falls back to, inline and on a tokenize worker. Each refusal here is one
// vLLM also answers with 400; everything else renders.
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import { shapeConversation } from '../../../src/tokenize/chat-messages.ts';
import { renderJinja, renderJinjaSegments, estimateOf } from '../../../src/tokenize/jinja-template.ts';
import { PromptTokenizer } from '../../../src/tokenize/prompt-tokenizer.ts';
import { promptRefs } from '../../../src/tokenize/pool-refs.ts';
import { getTokenizer } from '../../../src/tokenize/tokenizer.ts';
import type { ChatMessage } from '../../../src/tokenize/types.ts';
import type { PoolConfig } from '../../../src/config/schema.ts';
import { modelDir } from '../../helpers/model-tokenizers.ts';

const msgs = (x: unknown): ChatMessage[] => x as ChatMessage[];
const unsupported = fileURLToPath(new URL('../../fixtures/tokenizer/templates/unsupported.jinja', import.meta.url));

void test('text, input_text, refusal and plain-string parts are text; image parts stay parts for templates that loop over content', () => {
  const s = shapeConversation(msgs([{ role: 'user', content: [{ type: 'input_text', text: 'a' }, 'b', { type: 'image_url', image_url: { url: 'u' } }] }, { role: 'assistant', content: [{ type: 'refusal', refusal: 'no' }] }]), 'openai');
  assert.deepEqual(s.messages[0]!.content, [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }, { type: 'image' }]);
  assert.deepEqual(s.messages[1]!.content, [{ type: 'text', text: 'no' }]);
  assert.equal(s.images, 1);
  assert.equal(shapeConversation(msgs([{ role: 'assistant', content: [{ type: 'refusal', refusal: 'no' }, { type: 'output_text', text: 'x' }] }]), 'string').messages[0]!.content, 'no\nx');
});

void test('Gemma 3 renders <start_of_image> for an image part, counted as 256 image tokens between vLLM\'s newlines', () => {
  const dir = modelDir('gemma3');
  const refs = promptRefs({ tokenizer: { path: dir }, chat_template: 'auto' });
  const messages = msgs([{ role: 'user', content: [{ type: 'text', text: 'What is it?' }, { type: 'image_url', image_url: { url: 'data:x' } }] }]);
  assert.ok(renderJinja(refs.template, messages, null, getTokenizer(refs.tokenizer)).includes('What is it?<start_of_image>'));
  const segments = renderJinjaSegments(refs.template, messages, null, getTokenizer(refs.tokenizer));
  assert.equal(estimateOf(segments), undefined, 'counted exactly, not estimated');
  const expansion = segments.find((s) => s.startsWith('\n\n<start_of_image>'))!;
  assert.equal(Array.from(getTokenizer(refs.tokenizer).encodeWithSpecials(expansion)).filter((id) => id === 262144).length, 256, '<image_soft_token> × 256');
});

void test('images on a model whose expansion is not modelled are estimated and marked so', () => {
  const refs = promptRefs({ tokenizer: { path: modelDir('qwen3') }, chat_template: 'auto' });
  const segments = renderJinjaSegments(refs.template, msgs([{ role: 'user', content: [{ type: 'text', text: 'hi' }, { type: 'image_url', image_url: { url: 'u' } }] }]), null, getTokenizer(refs.tokenizer));
  assert.equal(estimateOf(segments)?.reason, 'media_estimate');
});

void test('the 400s vLLM returns: tool arguments that are not JSON, an unknown or missing part type, chat_template in kwargs', () => {
  const refs = promptRefs({ tokenizer: { path: modelDir('qwen3') }, chat_template: 'auto' });
  const tok = getTokenizer(refs.tokenizer);
  const call = (args: string): ChatMessage[] => msgs([{ role: 'user', content: 'x' }, { role: 'assistant', content: null, tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: args } }] }]);
  assert.throws(() => renderJinja(refs.template, call('{"city": '), null, tok), { name: 'ChatTemplateError' });
  assert.ok(renderJinja(refs.template, call(''), null, tok).includes('"arguments": {}'), 'empty arguments are {}');
  assert.throws(() => renderJinja(refs.template, msgs([{ role: 'user', content: [{ type: 'mystery' }] }]), null, tok), { name: 'ChatTemplateError' });
  assert.throws(() => renderJinja(refs.template, msgs([{ role: 'user', content: [{ text: 'x' }] }]), null, tok), { name: 'ChatTemplateError' });
  assert.throws(() => renderJinja(refs.template, msgs([{ role: 'user', content: 'x' }]), null, tok, { templateKwargs: { chat_template: '{{ 1 }}' } }), { name: 'ChatTemplateError' });
});

void test('chat_template_kwargs and add_generation_prompt reach the template (Qwen3 enable_thinking)', () => {
  const refs = promptRefs({ tokenizer: { path: modelDir('qwen3') }, chat_template: 'auto' });
  const tok = getTokenizer(refs.tokenizer);
  const m = msgs([{ role: 'user', content: 'x' }]);
  assert.ok(renderJinja(refs.template, m, null, tok, { templateKwargs: { enable_thinking: false } }).endsWith('<|im_start|>assistant\n<think>\n\n</think>\n\n'));
  assert.ok(renderJinja(refs.template, m, null, tok, { addGenerationPrompt: false }).endsWith('<|im_end|>\n'));
});

const pool = { id: 'odd', tokenizer: 'llama3', chat_template: unsupported, block_size: 16 } as unknown as PoolConfig;
let tk: PromptTokenizer;
before(async () => {
  tk = await PromptTokenizer.create({ threads: 1, inline_max_chars: 256, cache_bytes: 8 << 20 }, ['llama3']);
});
after(async () => {
  await tk.close();
});

void test('a template the renderer cannot run: an estimate with no block hashes, inline and from the worker alike', async () => {
  const short = await tk.tokenize({ pool, kind: 'chat', messages: msgs([{ role: 'user', content: 'How are you today?' }]), adapter: null });
  assert.equal(short.estimated, 'unsupported');
  assert.equal(short.blockHashes.length, 0);
  // The message's role and text, + 4 tokens for its markup + 4 for the generation prompt.
  assert.equal(short.promptTokens, getTokenizer('llama3').encodeWithSpecials('user\nHow are you today?\n').length + 8);
  const long = await tk.tokenize({ pool, kind: 'chat', messages: msgs([{ role: 'user', content: 'word '.repeat(400) }]), adapter: null });
  assert.equal(tk.stats().pooled, 1, 'the long one ran on the worker');
  assert.equal(long.estimated, 'unsupported');
  assert.equal(long.blockHashes.length, 0);
  assert.ok(long.promptTokens > 400);
});
