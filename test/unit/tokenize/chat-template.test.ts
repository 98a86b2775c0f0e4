import { test } from 'node:test';
import assert from 'node:assert/strict';
import { contentText, pythonStrip, pythonToJson, renderChat, renderChatSegments, vllmToolDump } from '../../../src/tokenize/chat-template.ts';
import type { ChatMessage } from '../../../src/tokenize/types.ts';

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

void test('llama3.1: content parts are text parts joined with a newline (input_text, refusal and plain strings too, as vLLM reads them); null content is empty; an image part is a 400 for this text model', () => {
  assert.throws(() => renderChat('llama3.1', [{ role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'image_url' }] }]), { name: 'ChatTemplateError' });
  const mixed = [{ type: 'input_text', text: 'a' }, { type: 'refusal', refusal: 'no' }, 'b'] as unknown as ChatMessage['content'];
  assert.equal(contentText(mixed), 'a\nno\nb');
  const out = renderChat('llama3.1', [
    { role: 'user', content: [{ type: 'text', text: 'one ' }, { type: 'text', text: ' two' }] },
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
  assert.ok(renderChat('llama3.1', [{ role: 'assistant', tool_calls: [{ function: { name: 'f', arguments: '' } }] }]).includes('{"name": "f", "parameters": {}}'));
  assert.throws(() => renderChat('llama3.1', [{ role: 'assistant', tool_calls: [{ function: { name: 'f', arguments: '{bad' } }] }]), { name: 'ChatTemplateError' });
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
  // A part with no type or an unknown type is refused, as vLLM's parser refuses it.
  for (const part of [null, { type: 'mystery' }, { text: 'x' }]) {
    assert.throws(() => contentText([part] as unknown as ChatMessage['content']), { name: 'ChatTemplateError' }, JSON.stringify(part));
  }
});

// json.dumps(tool, ensure_ascii=False, indent=4) from Python 3, for the two tools below, as vLLM dumps them.
const TOOL_JSON: string[] = ["{\n    \"type\": \"function\",\n    \"function\": {\n        \"name\": \"get_weather\",\n        \"description\": \"Get the weather, «now»\",\n        \"parameters\": {\n            \"type\": \"object\",\n            \"properties\": {\n                \"city\": {\n                    \"type\": \"string\"\n                },\n                \"days\": {\n                    \"type\": \"integer\",\n                    \"enum\": [\n                        1,\n                        2\n                    ]\n                }\n            },\n            \"required\": [\n                \"city\"\n            ],\n            \"additionalProperties\": false\n        }\n    }\n}", "{\n    \"type\": \"function\",\n    \"function\": {\n        \"name\": \"noop\",\n        \"description\": null,\n        \"parameters\": null,\n        \"strict\": true\n    }\n}"];

void test('llama3.1 with request tools: ipython environment line and the tools-in-first-user-message turn', () => {
  const tools = [
    { type: 'function', function: { name: 'get_weather', description: 'Get the weather, «now»', parameters: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer', enum: [1, 2] } }, required: ['city'], additionalProperties: false } } },
    { function: { name: 'noop', strict: true } },
  ];
  const out = renderChat('llama3.1', [{ role: 'system', content: 'Be terse.' }, { role: 'user', content: ' Weather in Oslo? ' }, { role: 'assistant', content: 'Calling.' }], tools);
  assert.equal(
    out,
    '<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\nBe terse.<|eot_id|>' +
      '<|start_header_id|>user<|end_header_id|>\n\nGiven the following functions, please respond with a JSON for a function call with its proper arguments that best answers the given prompt.\n\n' +
      'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.Do not use variables.\n\n' +
      `${TOOL_JSON[0] as string}\n\n${TOOL_JSON[1] as string}\n\nWeather in Oslo?<|eot_id|>` +
      `<|start_header_id|>assistant<|end_header_id|>\n\nCalling.<|eot_id|>${GEN}`,
  );
  assert.equal(renderChatSegments('llama3.1', [{ role: 'user', content: 'q' }], tools).length, 3);
  assert.throws(() => renderChat('llama3.1', [{ role: 'system', content: 's' }], tools), { name: 'ChatTemplateError' });
  assert.throws(() => vllmToolDump({ type: 'function' }), { name: 'ChatTemplateError' });
  // An empty tools array is still "tools is not none".
  assert.ok(renderChat('llama3.1', [{ role: 'user', content: 'q' }], []).includes('Environment: ipython\n'));
  assert.equal(renderChat('chatml', [{ role: 'user', content: 'q' }], tools), renderChat('chatml', [{ role: 'user', content: 'q' }]));
});
