import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { ChatTemplateError } from '../../../src/tokenize/chat-template.ts';
import { detectContentFormat, readChatTemplate, renderJinja, renderJinjaSegments } from '../../../src/tokenize/jinja-template.ts';
import { chatPromptTokens } from '../../../src/tokenize/prompt.ts';
import { getTokenizer } from '../../../src/tokenize/tokenizer.ts';
import type { ChatMessage } from '../../../src/tokenize/types.ts';
import { modelDir, type ModelName } from '../../helpers/model-tokenizers.ts';

const raises = fileURLToPath(new URL('../../fixtures/tokenizer/templates/raises.jinja', import.meta.url));

/** The template the model's tokenizer_config.json ships. */
function templateOf(name: ModelName): string {
  return `${modelDir(name)}/tokenizer_config.json`;
}

interface TemplateCase {
  name: string;
  model: ModelName;
  /** Relative to the repository root. */
  template: string;
  format: 'string' | 'openai';
  special_tokens: Record<string, string>;
  messages: ChatMessage[];
  tools: unknown[] | null;
}

const root = fileURLToPath(new URL('../../../', import.meta.url));
const fixtures = new URL('../../fixtures/tokenizer/templates/', import.meta.url);
const cases = JSON.parse(readFileSync(new URL('cases.json', fixtures), 'utf8')) as TemplateCase[];
// Rendered by Python's Jinja2 in transformers' environment (render-golden.py beside cases.json).
const golden = JSON.parse(readFileSync(new URL('golden.json', fixtures), 'utf8')) as Record<string, { text?: string; error?: string }>;
const byName = new Map(cases.map((c) => [c.name, c]));
const multiTurn = byName.get('qwen3 multi-turn')!.messages;
const toolChat = byName.get('qwen3 tools, tool calls, tool results')!.messages;
const weatherTool = byName.get('qwen3 tools, tool calls, tool results')!.tools![0];

for (const c of cases) {
  void test(`${c.name}: rendered as Python's Jinja2 renders it; ids segment by segment as the whole text's`, () => {
    const tok = getTokenizer(modelDir(c.model));
    const ref = `${root}${c.template}`;
    assert.deepEqual(tok.specialTokens, c.special_tokens, 'the template sees the same special tokens');
    assert.equal(detectContentFormat(readChatTemplate(ref)), c.format);
    const expected = golden[c.name]!;
    if (expected.error !== undefined) {
      assert.throws(() => renderJinja(ref, c.messages, c.tools, tok), (err: Error) => err instanceof ChatTemplateError && err.message.includes(expected.error!));
      return;
    }
    assert.equal(renderJinja(ref, c.messages, c.tools, tok), expected.text);
    // Tokenized segment by segment (cut before each special token), the same ids as the whole text with
    // add_special_tokens=False, as vLLM tokenizes it: the template's own BOS text is the only BOS. That the
    // whole text's ids are @lenml/tokenizers' is model-tokenizers.test.ts's check, on these same texts.
    const ids = Array.from(chatPromptTokens(tok, ref, c.messages, null, c.tools));
    assert.deepEqual(ids, Array.from(tok.encodeWithSpecials(expected.text!)));
    assert.ok(renderJinjaSegments(ref, c.messages, c.tools, tok).length > 2, 'cut into segments');
  });
}

void test('the BOS comes from the template text alone: one <bos> for Gemma 3, one <｜begin▁of▁sentence｜> for DeepSeek V3, none for Qwen3', () => {
  const count = (name: ModelName, id: number): number =>
    Array.from(chatPromptTokens(getTokenizer(modelDir(name)), templateOf(name), multiTurn)).filter((x) => x === id).length;
  assert.equal(count('gemma3', 2), 1);
  assert.equal(count('deepseek_v3', 0), 1);
  assert.equal(chatPromptTokens(getTokenizer(modelDir('qwen3')), templateOf('qwen3'), multiTurn)[0], 151644); // <|im_start|>
});

void test('tools reach the template as vLLM dumps them, through tojson without ASCII escaping and with Python separators', () => {
  const text = renderJinja(templateOf('qwen3'), toolChat, [weatherTool], getTokenizer(modelDir('qwen3')));
  assert.ok(text.includes('{"type": "function", "function": {"name": "get_weather", "description": "天気を調べる", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}'));
  // The arguments string was parsed, so the template printed the object with tojson.
  assert.ok(text.includes('<tool_call>\n{"name": "get_weather", "arguments": {"city": "東京"}}\n</tool_call>'));
});

void test('a template that raises is a ChatTemplateError with its own message; strftime_now is defined', () => {
  const tok = getTokenizer('cl100k_base');
  const two: ChatMessage[] = [{ role: 'user', content: 'a' }, { role: 'assistant', content: 'b' }];
  assert.match(renderJinja(raises, two, null, tok), /^<\|im_start\|>user 4\na<\|im_end\|>\n/);
  assert.throws(() => renderJinja(raises, [...two, { role: 'user', content: 'c' }], null, tok), (err: Error) => err instanceof ChatTemplateError && /at most two messages, got 3/.test(err.message));
});

void test('content format: templates that loop over message content get OpenAI parts, the others strings', () => {
  assert.equal(detectContentFormat(readChatTemplate(templateOf('gemma3'))), 'openai');
  assert.equal(detectContentFormat(readChatTemplate(templateOf('qwen3'))), 'string');
  assert.equal(detectContentFormat(readChatTemplate(templateOf('deepseek_v3'))), 'string');
  assert.equal(detectContentFormat('{% set c = message.content %}{% for p in c %}{{ p.text }}{% endfor %}'), 'openai');
});
