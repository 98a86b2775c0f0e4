// Responses input as chat messages, in vLLM's order (instructions, the previous turn's messages and output,
// then the input), and the rendered Llama 3.1 prompt of a continued conversation; refused shapes name their field.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseResponsesInput, responsesMessages } from '../../../src/tokenize/responses-messages.ts';
import { parseResponsesFields } from '../../../src/pipeline/parse-responses.ts';
import { renderChat } from '../../../src/tokenize/chat-template.ts';

test('a string is one user message; message items keep their role and their text parts', () => {
  assert.deepEqual(parseResponsesInput('hi'), [{ role: 'user', content: 'hi' }]);
  assert.deepEqual(parseResponsesInput([
    { role: 'developer', content: 'be brief' },
    { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'a' }, { type: 'input_text', text: 'b' }] },
    { role: 'assistant', content: [{ type: 'output_text', text: 'c' }] },
  ]), [
    { role: 'developer', content: 'be brief' },
    { role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }] },
    { role: 'assistant', content: [{ type: 'text', text: 'c' }] },
  ]);
});

test('refused input shapes name the field', () => {
  const param = (v: unknown): string => {
    const r = parseResponsesInput(v);
    assert.ok(!Array.isArray(r));
    return r.param;
  };
  assert.equal(param(5), 'input');
  assert.equal(param([]), 'input');
  assert.equal(param([null]), 'input[0]');
  assert.equal(param([{ type: 'function_call', name: 'f' }]), 'input[0].type');
  assert.equal(param([{ role: 'tool', content: 'x' }]), 'input[0].role');
  assert.equal(param([{ role: 'user', content: [{ type: 'input_image', image_url: 'u' }] }]), 'input[0].content[0]');
  assert.equal(param([{ role: 'user', content: 3 }]), 'input[0].content');
});

test('the conversation: instructions, the previous turn (its own system message too), its output, the input', () => {
  const previous = { messages: [{ role: 'system', content: 'old rules' }, { role: 'user', content: 'q1' }], outputTexts: ['a1'] };
  const msgs = responsesMessages('new rules', previous, [{ role: 'user', content: 'q2' }]);
  assert.deepEqual(msgs.map((m) => [m.role, m.content]), [['system', 'new rules'], ['system', 'old rules'], ['user', 'q1'], ['assistant', 'a1'], ['user', 'q2']]);
  assert.deepEqual(responsesMessages(null, null, [{ role: 'user', content: 'x' }]), [{ role: 'user', content: 'x' }]);
  assert.deepEqual(responsesMessages('', null, [{ role: 'user', content: 'x' }]), [{ role: 'user', content: 'x' }], 'empty instructions add no system turn');
});

test('a continued conversation renders through the Llama 3.1 template as vLLM renders it', () => {
  const msgs = responsesMessages('Be brief.', { messages: [{ role: 'user', content: 'Hi' }], outputTexts: ['Hello!'] }, [{ role: 'user', content: 'Bye' }]);
  const text = renderChat('llama3.1', msgs, null);
  assert.equal(text,
    '<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\nBe brief.<|eot_id|>' +
    '<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>' +
    '<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n');
});

test('body fields: max_output_tokens, store default, background refused, wrong types name their param', () => {
  const ok = parseResponsesFields({ input: 'x', max_output_tokens: 5, instructions: 'i', previous_response_id: 'resp_1' });
  assert.ok(!('code' in ok));
  assert.equal(ok.maxTokens, 5);
  assert.deepEqual(ok.fields, { instructions: 'i', previousResponseId: 'resp_1', input: [{ role: 'user', content: 'x' }], store: true });
  const bad = (body: Record<string, unknown>): string | null | undefined => {
    const r = parseResponsesFields(body);
    assert.ok('code' in r);
    assert.equal(r.code, 'invalid_value');
    return r.param;
  };
  assert.equal(bad({}), 'input');
  assert.equal(bad({ input: 'x', max_output_tokens: 0 }), 'max_output_tokens');
  assert.equal(bad({ input: 'x', max_output_tokens: 1.5 }), 'max_output_tokens');
  assert.equal(bad({ input: 'x', background: true }), 'background');
  assert.equal(bad({ input: 'x', store: 1 }), 'store');
  assert.equal(bad({ input: 'x', previous_response_id: '' }), 'previous_response_id');
  assert.equal(bad({ input: 'x', instructions: ['a'] }), 'instructions');
  assert.equal(bad({ input: 'x', tools: {} }), 'tools');
  const noStore = parseResponsesFields({ input: 'x', store: false });
  assert.ok(!('code' in noStore) && noStore.fields.store === false);
});
