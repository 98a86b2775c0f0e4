// parseBody and upstreamBody, table-driven: every `invalid_value` param the validator can name, the
// `invalid_json` cases, what a valid body yields, and the body the replica receives.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MAX_JSON_DEPTH, parseBody, upstreamBody, type ParsedBody, type Route } from '../../../src/pipeline/parse-body.ts';
import type { Rejection } from '../../../src/errors/rejection.ts';
import { errorBody } from '../../../src/errors/openai-error-body.ts';
import { statusOf } from '../../../src/errors/rejection.ts';

const chatBase = { model: 'm', messages: [{ role: 'user', content: 'hi' }] };
const cmplBase = { model: 'm', prompt: 'hi' };

function parse(route: Route, body: unknown): ParsedBody | Rejection {
  return parseBody(route, Buffer.from(typeof body === 'string' ? body : JSON.stringify(body)));
}

function asRejection(r: ParsedBody | Rejection): Rejection {
  assert.ok('code' in r, `expected a rejection, got ${JSON.stringify(r)}`);
  return r;
}

function asParsed(r: ParsedBody | Rejection): ParsedBody {
  assert.ok(!('code' in r), `expected a parsed body, got ${JSON.stringify(r)}`);
  return r;
}

// [title, route, body, expected param]
const INVALID_VALUE: Array<[string, Route, Record<string, unknown>, string]> = [
  ['model missing', 'chat', { messages: chatBase.messages }, 'model'],
  ['model empty', 'chat', { ...chatBase, model: '' }, 'model'],
  ['model a number', 'completions', { ...cmplBase, model: 7 }, 'model'],
  ['stream a string', 'chat', { ...chatBase, stream: 'true' }, 'stream'],
  ['stream a number', 'completions', { ...cmplBase, stream: 1 }, 'stream'],
  ['stream_options a string', 'chat', { ...chatBase, stream: true, stream_options: 'yes' }, 'stream_options'],
  ['stream_options an array', 'chat', { ...chatBase, stream: true, stream_options: [true] }, 'stream_options'],
  ['stream_options without stream', 'chat', { ...chatBase, stream_options: { include_usage: true } }, 'stream_options'],
  ['stream_options with stream false', 'completions', { ...cmplBase, stream: false, stream_options: {} }, 'stream_options'],
  ['include_usage a string', 'chat', { ...chatBase, stream: true, stream_options: { include_usage: 'yes' } }, 'stream_options.include_usage'],
  ['max_tokens zero', 'chat', { ...chatBase, max_tokens: 0 }, 'max_tokens'],
  ['max_tokens negative', 'completions', { ...cmplBase, max_tokens: -5 }, 'max_tokens'],
  ['max_tokens fractional', 'chat', { ...chatBase, max_tokens: 1.5 }, 'max_tokens'],
  ['max_tokens a string', 'chat', { ...chatBase, max_tokens: '10' }, 'max_tokens'],
  ['max_completion_tokens zero', 'chat', { ...chatBase, max_completion_tokens: 0 }, 'max_completion_tokens'],
  ['max_completion_tokens a string', 'chat', { ...chatBase, max_completion_tokens: 'lots' }, 'max_completion_tokens'],
  ['max_tokens bad next to a good max_completion_tokens', 'chat', { ...chatBase, max_completion_tokens: 5, max_tokens: 'x' }, 'max_tokens'],
  ['n zero', 'chat', { ...chatBase, n: 0 }, 'n'],
  ['n above 16', 'chat', { ...chatBase, n: 17 }, 'n'],
  ['n fractional', 'completions', { ...cmplBase, n: 2.5 }, 'n'],
  ['n a string', 'chat', { ...chatBase, n: '2' }, 'n'],
  ['messages missing', 'chat', { model: 'm' }, 'messages'],
  ['messages empty', 'chat', { model: 'm', messages: [] }, 'messages'],
  ['messages an object', 'chat', { model: 'm', messages: { role: 'user', content: 'x' } }, 'messages'],
  ['a message null', 'chat', { model: 'm', messages: [{ role: 'user', content: 'a' }, null] }, 'messages[1]'],
  ['a message a string', 'chat', { model: 'm', messages: ['hello'] }, 'messages[0]'],
  ['a message an array', 'chat', { model: 'm', messages: [[{ role: 'user' }]] }, 'messages[0]'],
  ['role missing', 'chat', { model: 'm', messages: [{ content: 'x' }] }, 'messages[0].role'],
  ['role unknown', 'chat', { model: 'm', messages: [{ role: 'user', content: 'a' }, { role: 'robot', content: 'b' }] }, 'messages[1].role'],
  ['role a number', 'chat', { model: 'm', messages: [{ role: 1, content: 'x' }] }, 'messages[0].role'],
  ['user content missing', 'chat', { model: 'm', messages: [{ role: 'user' }] }, 'messages[0].content'],
  ['system content null', 'chat', { model: 'm', messages: [{ role: 'system', content: null }] }, 'messages[0].content'],
  ['content a number', 'chat', { model: 'm', messages: [{ role: 'user', content: 42 }] }, 'messages[0].content'],
  ['content an object', 'chat', { model: 'm', messages: [{ role: 'user', content: { text: 'x' } }] }, 'messages[0].content'],
  ['text part without text', 'chat', { model: 'm', messages: [{ role: 'user', content: [{ type: 'text' }] }] }, 'messages[0].content[0]'],
  ['content part null', 'chat', { model: 'm', messages: [{ role: 'user', content: [null] }] }, 'messages[0].content[0]'],
  ['tools an object', 'chat', { ...chatBase, tools: { type: 'function' } }, 'tools'],
  ['continue_final_message with the default add_generation_prompt (vLLM refuses both true)', 'chat', { ...chatBase, continue_final_message: true }, 'continue_final_message'],
  ['chat_template_kwargs a list', 'chat', { ...chatBase, chat_template_kwargs: [1] }, 'chat_template_kwargs'],
  ['add_generation_prompt a string', 'chat', { ...chatBase, add_generation_prompt: 'yes' }, 'add_generation_prompt'],
  ['tools a string', 'chat', { ...chatBase, tools: 'none' }, 'tools'],
  ['prompt missing', 'completions', { model: 'm' }, 'prompt'],
  ['prompt a number', 'completions', { model: 'm', prompt: 5 }, 'prompt'],
  ['prompt an empty array', 'completions', { model: 'm', prompt: [] }, 'prompt'],
  ['prompt a batch of two strings', 'completions', { model: 'm', prompt: ['a', 'b'] }, 'prompt'],
  ['prompt with a negative token id', 'completions', { model: 'm', prompt: [1, -2] }, 'prompt'],
  ['prompt with a fractional token id', 'completions', { model: 'm', prompt: [1, 2.5] }, 'prompt'],
  ['prompt a nested token batch', 'completions', { model: 'm', prompt: [[1, 2]] }, 'prompt'],
  ['prompt null', 'completions', { model: 'm', prompt: null }, 'prompt'],
];

for (const [title, route, body, param] of INVALID_VALUE) {
  test(`${route}: ${title} is invalid_value with param ${param}`, () => {
    const r = asRejection(parse(route, body));
    assert.equal(r.code, 'invalid_value');
    assert.equal(r.param, param);
    assert.ok(r.message && r.message.length > 0, 'a message says what is wrong');
    assert.equal(statusOf(r), 400);
    const wire = JSON.parse(errorBody(r)) as { error: { code: string; param: string; type: string } };
    assert.deepEqual([wire.error.code, wire.error.param, wire.error.type], ['invalid_value', param, 'invalid_request_error']);
  });
}

const INVALID_JSON: Array<[string, string]> = [
  ['not JSON at all', 'model=m'],
  ['truncated JSON', '{"model":"m","messages":['],
  ['an empty body', ''],
  ['a JSON array', '[{"model":"m"}]'],
  ['JSON null', 'null'],
  ['a JSON string', '"hello"'],
  ['a JSON number', '12'],
];

for (const [title, text] of INVALID_JSON) {
  test(`${title} is invalid_json (400) on both routes`, () => {
    for (const route of ['chat', 'completions'] as const) {
      const r = asRejection(parse(route, text));
      assert.equal(r.code, 'invalid_json');
      assert.equal(statusOf(r), 400);
      assert.equal(r.param, undefined);
    }
  });
}

test('a minimal chat body parses with defaults: no stream, no usage, n 1, max tokens unset', () => {
  const p = asParsed(parse('chat', chatBase));
  assert.equal(p.model, 'm');
  assert.equal(p.stream, false);
  assert.equal(p.includeUsage, false);
  assert.equal(p.maxTokens, null);
  assert.equal(p.n, 1);
  assert.deepEqual(p.messages, chatBase.messages);
  assert.equal(p.prompt, null);
  assert.equal(p.tools, null);
  const tools = [{ type: 'function', function: { name: 'f', parameters: {} } }];
  assert.deepEqual(asParsed(parse('chat', { ...chatBase, tools })).tools, tools, 'tools are kept for the chat template');
});

test('an assistant message may omit content (tool-call turns), and null stream/n/max_tokens count as absent', () => {
  const p = asParsed(parse('chat', {
    model: 'm', stream: null, n: null, max_tokens: null, stream_options: null,
    messages: [{ role: 'user', content: 'a' }, { role: 'assistant', content: null, tool_calls: [] }, { role: 'tool', content: 'r' }],
  }));
  assert.equal(p.stream, false);
  assert.equal(p.n, 1);
  assert.equal(p.maxTokens, null);
  assert.equal(p.messages!.length, 3);
});

test('every role vLLM templates accept is allowed, and text content parts are accepted', () => {
  for (const role of ['system', 'developer', 'user', 'assistant', 'tool', 'ipython', 'function']) {
    asParsed(parse('chat', { model: 'm', messages: [{ role, content: [{ type: 'text', text: 'x' }] }] }));
  }
});

test('max_completion_tokens wins over max_tokens; stream with include_usage is read', () => {
  const p = asParsed(parse('chat', { ...chatBase, max_completion_tokens: 7, max_tokens: 99, stream: true, stream_options: { include_usage: true }, n: 3 }));
  assert.equal(p.maxTokens, 7);
  assert.equal(p.stream, true);
  assert.equal(p.includeUsage, true);
  assert.equal(p.n, 3);
  const q = asParsed(parse('chat', { ...chatBase, max_tokens: 99, stream: true, stream_options: { include_usage: false } }));
  assert.equal(q.maxTokens, 99);
  assert.equal(q.includeUsage, false);
});

test('completions prompts: a string, an empty string, one string in an array, and token ids', () => {
  assert.equal(asParsed(parse('completions', { model: 'm', prompt: 'abc' })).prompt, 'abc');
  assert.equal(asParsed(parse('completions', { model: 'm', prompt: '' })).prompt, '');
  assert.equal(asParsed(parse('completions', { model: 'm', prompt: ['one'] })).prompt, 'one');
  assert.deepEqual(asParsed(parse('completions', { model: 'm', prompt: [128000, 0, 5] })).prompt, [128000, 0, 5]);
  assert.equal(asParsed(parse('completions', { model: 'm', prompt: 'x' })).messages, null);
});

test('the upstream body names the served model, makes max_tokens explicit and always asks for usage', () => {
  const p = asParsed(parse('chat', { ...chatBase, model: 'gpt-fast', max_completion_tokens: 12, stream: true, stream_options: { continuous_usage_stats: true }, temperature: 0.2, seed: 9 }));
  const out = JSON.parse(upstreamBody(p, 'llama-3.1-8b-instruct', 12)) as Record<string, unknown>;
  assert.equal(out.model, 'llama-3.1-8b-instruct');
  assert.equal(out.max_tokens, 12);
  assert.equal(out.max_completion_tokens, null, 'nulled: vLLM would prefer it to max_tokens');
  assert.deepEqual(out.stream_options, { continuous_usage_stats: true, include_usage: true });
  assert.equal(out.temperature, 0.2, 'fields the gateway does not use pass through');
  assert.equal(out.seed, 9);
  assert.deepEqual(out.messages, chatBase.messages);
  // The fields the gateway reads keep the client's values, and a second call (a retry reuses the body, but
  // nothing may depend on calling it once) gives the same bytes
  assert.equal(p.model, 'gpt-fast');
  assert.equal(p.maxTokens, 12);
  const again = upstreamBody(p, 'llama-3.1-8b-instruct', 12);
  assert.deepEqual(JSON.parse(again), out);
  assert.equal(again, upstreamBody(p, 'llama-3.1-8b-instruct', 12));
});

test('a non-streaming upstream body has no stream_options and gets the defaulted max_tokens', () => {
  const p = asParsed(parse('completions', { model: 'acme-sql', prompt: 'x' }));
  const out = JSON.parse(upstreamBody(p, 'acme-sql', 64)) as Record<string, unknown>;
  assert.equal(out.max_tokens, 64);
  assert.equal('stream_options' in out, false);
  assert.equal(out.prompt, 'x');
});

test('a body nested past MAX_JSON_DEPTH is invalid_json, at any depth V8 can parse (20,000 arrays in an unknown field)', () => {
  const deep = `{"model":"m","messages":[{"role":"user","content":"hi"}],"extra":${'['.repeat(20000)}${']'.repeat(20000)}}`;
  for (const route of ['chat', 'completions'] as const) {
    const r = asRejection(parse(route, deep));
    assert.equal(r.code, 'invalid_json');
    assert.equal(statusOf(r), 400);
    assert.match(r.message ?? '', new RegExp(`more than ${MAX_JSON_DEPTH} levels deep`));
  }
  // Objects count as well as arrays, inside a message as well as at the top.
  const objects = `{"model":"m","messages":[{"role":"user","content":"hi","x":${'{"a":'.repeat(200)}1${'}'.repeat(200)}}]}`;
  assert.equal(asRejection(parse('chat', objects)).code, 'invalid_json');
});

test('nesting up to MAX_JSON_DEPTH (top-level object included) is accepted; one more level is not', () => {
  // The top-level object is level 1, so an "extra" field may nest MAX_JSON_DEPTH - 1 arrays.
  const at = (levels: number): string => `{"model":"m","prompt":"p","extra":${'['.repeat(levels)}${']'.repeat(levels)}}`;
  asParsed(parse('completions', at(MAX_JSON_DEPTH - 1)));
  assert.equal(asRejection(parse('completions', at(MAX_JSON_DEPTH))).code, 'invalid_json');
});

test('invalid UTF-8 inside a JSON string is invalid_json naming UTF-8; valid multi-byte text is kept as sent', () => {
  const prefix = Buffer.from('{"model":"m","prompt":"caf');
  const suffix = Buffer.from('"}');
  for (const bad of [[0xff], [0xc3], [0xe2, 0x82], [0xed, 0xa0, 0x80] /* an encoded lone surrogate */, [0xc0, 0xaf] /* overlong '/' */]) {
    const r = asRejection(parseBody('completions', Buffer.concat([prefix, Buffer.from(bad), suffix])));
    assert.equal(r.code, 'invalid_json', `bytes ${bad.join(',')}`);
    assert.match(r.message ?? '', /not valid UTF-8/);
  }
  const ok = asParsed(parseBody('completions', Buffer.concat([prefix, Buffer.from('é ☕ 🦙'), suffix])));
  assert.equal(ok.prompt, 'café ☕ 🦙');
});
