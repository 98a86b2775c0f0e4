import { before, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import reference from 'llama3-tokenizer-js';
import { getTokenizer } from '../../../src/tokenize/tokenizer.ts';
import { tokenizerKind } from '../../../src/tokenize/model-tokenizer.ts';
import { readTokenizerDir } from '../../../src/tokenize/hf-dir.ts';
import { MODEL_NAMES, loadReferenceTokenizers, modelDir, referenceTokenizer, type ModelName } from '../../helpers/model-tokenizers.ts';
import { corpus, randomText, seededRandom } from './corpus.ts';

// Multilingual and structured text beyond the shared corpus: CJK, emoji with joiners and skin tones, combining
// marks (decomposed "é" that NFC composes), RTL, code, digits in runs, whitespace runs.
const extra = [
  '你好，世界！今天天气很好。日本語のテキストとカタカナ、ひらがな。한국어 문장입니다.',
  '👩‍👩‍👧‍👦 family, 👍🏽 thumbs, 🏳️‍🌈 flag, ❤️‍🔥',
  'Cafe\u0301 re\u0301sume\u0301 nai\u0308ve A\u030a \u1e9b\u0323 ḱ',
  'مرحبا بالعالم — שלום עולם',
  'def f(x):\n    return {"a": [1, 2, 3]}  # comment\n\n\n\tindented\r\n',
  '1234567890 3.14159 1e10 0x1F 2026-12-03T08:00:00Z',
  '      spaces   then\n\n\n\n\nnewlines      ',
  "I'M HERE, you're there; they'LL go. ſ's 'ſ",
];

const modelSpecials: Record<ModelName, string[]> = {
  qwen3: ['<|im_start|>', '<|im_end|>', '<think>', '</tool_call>', '<|im_sta'],
  deepseek_v3: ['<｜User｜>', '<｜Assistant｜>', '<｜begin▁of▁sentence｜>', '<｜tool▁sep｜>', '<｜Us'],
  gemma3: ['<start_of_turn>', '<end_of_turn>', '<bos>', '<unused7>', '<start_of'],
  gptoss: ['<|start|>', '<|message|>', '<|end|>', '<|channel|>', '<|sta'],
  llama3_1: ['<|begin_of_text|>', '<|eot_id|>', '<|start_header_id|>', '<|python_tag|>', '<|eot_i'],
};

// The chat prompts the template fixtures render (Python's Jinja2, golden.json): jinja-template.test.ts holds our
// segment-by-segment ids to our whole-text ids on them, this file the whole-text ids to the reference's.
const fixtures = new URL('../../fixtures/tokenizer/templates/', import.meta.url);
const cases = JSON.parse(readFileSync(new URL('cases.json', fixtures), 'utf8')) as Array<{ name: string; model: ModelName }>;
const golden = JSON.parse(readFileSync(new URL('golden.json', fixtures), 'utf8')) as Record<string, { text?: string }>;

before(() => loadReferenceTokenizers(...MODEL_NAMES));

for (const name of MODEL_NAMES) {
  void test(`${name}: the directory's tokenizer gives @lenml/tokenizers' ids on the corpus, multilingual text and 300 random strings`, () => {
    const dir = modelDir(name);
    const ours = getTokenizer(dir);
    const ref = referenceTokenizer(name);
    const check = (text: string, label: string): void => {
      assert.deepEqual(Array.from(ours.encodeWithSpecials(text)), ref.encode(text, { add_special_tokens: false }), `${name} ${label}: ${JSON.stringify(text).slice(0, 120)}`);
    };
    for (const { name: label, text } of corpus) check(text, label);
    for (const text of extra) check(text, 'extra');
    const rendered = cases.filter((c) => c.model === name && golden[c.name]?.text !== undefined);
    assert.ok(rendered.length > 0, `${name}: rendered chat prompts in the fixtures`);
    for (const c of rendered) check(golden[c.name]!.text!, `rendered chat: ${c.name}`);
    const random = seededRandom(0x5eed + name.length);
    const specials = modelSpecials[name];
    for (let i = 0; i < 300; i++) {
      const text = randomText(random, 30) + (i % 3 === 0 ? specials[i % specials.length] + randomText(random, 10) : '');
      check(text, `random ${i}`);
    }
    // Long runs: one pre-tokenizer piece of thousands of letters goes through the heap BPE in one call.
    check('abcdefghij'.repeat(300), 'long piece');
    check(`${'x'.repeat(2000)} ${'中文'.repeat(500)}`, 'long pieces');
  });
}

void test('kinds: byte-level BPE models take the fast path, Gemma 3 (byte fallback) the library', () => {
  for (const name of ['qwen3', 'deepseek_v3', 'gptoss', 'llama3_1'] as const) assert.equal(tokenizerKind(modelDir(name)).kind, 'byte-level-bpe', name);
  assert.deepEqual(tokenizerKind(modelDir('gemma3')), { kind: 'library', modelType: 'BPE', reason: 'BPE with byte fallback' });
});

void test('llama3_1 directory: the same ids as llama3-tokenizer-js and as the built-in llama3 tokenizer', () => {
  const dir = getTokenizer(modelDir('llama3_1'));
  const builtin = getTokenizer('llama3');
  // The package ships Llama 3's files (ids 128008 and 128010 are still reserved tokens there, not 3.1's
  // <|eom_id|> and <|python_tag|>), so the one entry written with 3.1's names is left out.
  for (const { name, text } of corpus.filter((c) => !c.text.includes('<|python_tag|>'))) {
    const ids = Array.from(dir.encodeWithSpecials(text));
    assert.deepEqual(ids, reference.encode(text, { bos: false, eos: false }), name);
    assert.deepEqual(ids, Array.from(builtin.encodeWithSpecials(text)), name);
  }
});

void test('completions BOS (add_special_tokens=True): as transformers adds it per tokenizer class', () => {
  // Llama 3.1: the post-processor's TemplateProcessing; DeepSeek V3 (LlamaTokenizerFast) and Gemma 3
  // (GemmaTokenizer): add_bos_token in tokenizer_config.json; Qwen3 and gpt-oss add none.
  assert.equal(getTokenizer(modelDir('llama3_1')).bosId, 128000);
  assert.equal(getTokenizer(modelDir('deepseek_v3')).bosId, 0);
  assert.equal(getTokenizer(modelDir('gemma3')).bosId, 2);
  assert.equal(getTokenizer(modelDir('qwen3')).bosId, null);
  assert.equal(getTokenizer(modelDir('gptoss')).bosId, null);
  // The reference adds Llama's and Gemma's from their post-processors too.
  assert.equal(referenceTokenizer('llama3_1').encode('x')[0], 128000);
  assert.equal(referenceTokenizer('gemma3').encode('x')[0], 2);
});

void test('special tokens: bos/eos from tokenizer_config.json, whether strings or AddedToken objects', () => {
  assert.deepEqual(readTokenizerDir(modelDir('deepseek_v3')).specialTokens, {
    bos_token: '<｜begin▁of▁sentence｜>', eos_token: '<｜end▁of▁sentence｜>', pad_token: '<｜end▁of▁sentence｜>',
  });
  assert.equal(getTokenizer(modelDir('qwen3')).specialTokens.eos_token, '<|im_end|>');
  assert.equal(getTokenizer(modelDir('qwen3')).specialId('<|im_start|>'), 151644);
  assert.equal(getTokenizer(modelDir('gemma3')).specialTokens.bos_token, '<bos>');
});

void test('decode gives the text back on the byte-level path', () => {
  const qwen = getTokenizer(modelDir('qwen3'));
  for (const text of extra) assert.equal(qwen.decode(qwen.encodeWithSpecials(text)), text.normalize('NFC'));
});
