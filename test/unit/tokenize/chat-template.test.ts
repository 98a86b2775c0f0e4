import { test } from 'node:test';
import assert from 'node:assert/strict';
import { contentText, pythonStrip, pythonToJson, renderChat, renderChatSegments, type ChatMessage } from '../../../src/tokenize/chat-template.ts';

const HEAD = '<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n';
const GEN = '<|start_header_id|>assistant<|end_header_id|>\n\n';

void test('llama3.1: system + user, as vLLM renders Llama-3.1-8B-Instruct with no date_string', () => {
  const messages: ChatMessage[] = [
    { role: 'system', content: '  You are a helpful assistant.\n' },
    { role: 'user', content: '\n What is 2+2?  ' },
  ];
  assert.equal(
    renderChat('llama3.1', messages),
    `${HEAD}You are a helpful assistant.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>${GEN}`,
  );
});

void test('llama3.1: the system turn is emitted even without a system message', () => {
  assert.equal(
    renderChat('llama3.1', [{ role: 'user', content: 'Hi' }]),
    `${HEAD}<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>${GEN}`,
  );
  assert.equal(renderChat('llama3.1', []), `${HEAD}<|eot_id|>${GEN}`);
});

void test('llama3.1: only a leading system message is pulled out; a later one is an ordinary turn', () => {
  const out = renderChat('llama3.1', [
    { role: 'user', content: 'a' },
    { role: 'system', content: ' b ' },
    { role: 'assistant', content: 'c' },
  ]);
  assert.equal(
    out,
    `${HEAD}<|eot_id|><|start_header_id|>user<|end_header_id|>\n\na<|eot_id|><|start_header_id|>system<|end_header_id|>\n\nb<|eot_id|>` +
      `<|start_header_id|>assistant<|end_header_id|>\n\nc<|eot_id|>${GEN}`,
  );
});

void test('llama3.1: content parts are text parts joined with a newline; null content is empty', () => {
  const out = renderChat('llama3.1', [
    { role: 'user', content: [{ type: 'text', text: 'one ' }, { type: 'image_url' }, { type: 'text', text: ' two' }] },
    { role: 'assistant', content: null },
  ]);
  assert.equal(
    out,
    `${HEAD}<|eot_id|><|start_header_id|>user<|end_header_id|>\n\none \n two<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n<|eot_id|>${GEN}`,
  );
});

void test('llama3.1: tool call and tool result turns', () => {
  const out = renderChat('llama3.1', [
    { role: 'user', content: 'Weather in Paris?' },
    { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris","days":[1,2],"metric":true}' } }] },
    { role: 'tool', tool_call_id: 'c1', content: ' 21°C, "sunny"\n' },
  ]);
  assert.equal(
    out,
    `${HEAD}<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWeather in Paris?<|eot_id|>` +
      '<|start_header_id|>assistant<|end_header_id|>\n\n{"name": "get_weather", "parameters": {"city": "Paris", "days": [1, 2], "metric": true}}<|eot_id|>' +
      `<|start_header_id|>ipython<|end_header_id|>\n\n" 21°C, \\"sunny\\"\\n"<|eot_id|>${GEN}`,
  );
  assert.throws(() => renderChat('llama3.1', [{ role: 'assistant', tool_calls: [] }]), /single tool-calls/);
});

void test('llama3.1: segments are one per turn and join to the prompt', () => {
  const messages: ChatMessage[] = [
    { role: 'system', content: 'S' },
    { role: 'user', content: 'U1' },
    { role: 'assistant', content: 'A1' },
    { role: 'user', content: 'U2' },
  ];
  const segments = renderChatSegments('llama3.1', messages);
  assert.equal(segments.length, 5);
  assert.equal(segments[0], `${HEAD}S<|eot_id|>`);
  assert.equal(segments[3], '<|start_header_id|>user<|end_header_id|>\n\nU2<|eot_id|>');
  assert.equal(segments[4], GEN);
  assert.equal(segments.join(''), renderChat('llama3.1', messages));
});

void test('chatml: untrimmed turns and the assistant generation prompt', () => {
  assert.equal(
    renderChat('chatml', [{ role: 'system', content: 'Be brief. ' }, { role: 'user', content: 'Hi' }]),
    '<|im_start|>system\nBe brief. <|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n',
  );
});

void test('pythonStrip strips exactly Python str.isspace() characters', () => {
  assert.equal(pythonStrip('\u001c\u0085\u00a0 x \u3000\u001f'), 'x');
  assert.equal(pythonStrip('\ufeffx\ufeff'), '\ufeffx\ufeff');
  assert.equal(pythonStrip('\u200bx'), '\u200bx');
  assert.equal(pythonStrip(' \n\t '), '');
});

void test('pythonToJson matches json.dumps(ensure_ascii=False) spacing and escapes', () => {
  assert.equal(pythonToJson({ a: 1, b: [true, null, 'é\u0001'], c: { d: 'x"y' } }), '{"a": 1, "b": [true, null, "é\\u0001"], "c": {"d": "x\\"y"}}');
  assert.equal(pythonToJson([]), '[]');
  assert.equal(pythonToJson({}), '{}');
  assert.equal(contentText([]), '');
});

void test('malformed messages are a ChatTemplateError (a 400), never a crash', () => {
  const bad = [
    { role: 'user', content: 42 },
    { role: 'user', content: { text: 'x' } },
    { role: 'user', content: [{ type: 'text', text: 7 }] },
    { role: 5, content: 'x' },
  ] as unknown as ChatMessage[];
  for (const m of bad) {
    assert.throws(() => renderChat('llama3.1', [m]), { name: 'ChatTemplateError' }, JSON.stringify(m));
    assert.throws(() => renderChat('chatml', [m]), { name: 'ChatTemplateError' }, JSON.stringify(m));
  }
  // Non-text parts and junk entries in a parts array are skipped: rejecting them is request validation's job.
  assert.equal(contentText([{ type: 'image_url' }, null, 'x', { type: 'text', text: 'ok' }] as unknown as ChatMessage['content']), 'ok');
});
