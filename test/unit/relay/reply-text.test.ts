// The reply text the relay collects for a finished reply's block hashes: SseRelay with collectText over every
// golden stream split at every byte, escapes and look-alike keys; replyText() over non-streaming bodies.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import type { ClientSink } from '../../../src/relay/client-sink.ts';
import { replyText } from '../../../src/relay/json-figures.ts';
import { SseRelay } from '../../../src/relay/sse-relay.ts';

const nullSink: ClientSink = {
  aborted: false, started: true, begin() {}, write: () => true, end() {}, onDrain() {}, setAbortHandler() {}, cork: (fn: () => void) => fn(),
};

const fixture = (name: string): string => readFileSync(new URL(`../../fixtures/sse/${name}`, import.meta.url), 'utf8');

/** The reply as a client reassembles it: every data event's delta content (chat) or text (completions). */
function reassembled(stream: string, chat: boolean): string {
  let out = '';
  for (const ev of stream.split('\n\n')) {
    if (!ev.startsWith('data: {')) continue;
    const parsed = JSON.parse(ev.slice(6)) as { choices: Array<{ delta?: { content?: string | null }; text?: string }> };
    for (const c of parsed.choices) out += (chat ? c.delta?.content : c.text) ?? '';
  }
  return out;
}

function relayed(chunks: Buffer[], chat: boolean, collect: boolean): SseRelay {
  const relay = new SseRelay(nullSink, false, chat, collect);
  for (const c of chunks) relay.push(c);
  relay.close();
  return relay;
}

const STREAMS = [
  { file: 'chat-stream-usage.txt', chat: true }, { file: 'chat-stream-natural-stop.txt', chat: true },
  { file: 'chat-stream-cached.txt', chat: true }, { file: 'chat-stream-continuous-usage.txt', chat: true },
  { file: 'completion-stream-usage.txt', chat: false }, { file: 'completion-stream.txt', chat: false },
];

for (const s of STREAMS) {
  void test(`${s.file}: the collected text is the reply a client reassembles, wherever the chunks split; nothing when off`, () => {
    const text = fixture(s.file);
    const want = reassembled(text, s.chat);
    assert.ok(want.length > 0);
    const bytes = Buffer.from(text);
    for (let k = 0; k <= bytes.length; k += 7) {
      assert.equal(relayed([bytes.subarray(0, k), bytes.subarray(k)], s.chat, true).replyText(), want, `split at ${k}`);
    }
    assert.equal(relayed([bytes], s.chat, false).replyText(), '');
  });
}

void test('escapes, non-ASCII, look-alike keys and the role chunk: the text is exactly the deltas\' content', () => {
  const pieces = ['Say "hi"', '\n\nline two\\', ' caf\u00e9 ☕', ' "content":"not a key"', '\\', '"', 'a"b\\"c\\\\', ' end.'];
  const head = 'data: {"id":"x","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":0,"delta":';
  let stream = `${head}{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}\n\n`;
  stream += `${head}{"reasoning_content":"thinking..."},"logprobs":null,"finish_reason":null}]}\n\n`;
  for (const p of pieces) stream += `${head}{"content":${JSON.stringify(p)}},"logprobs":null,"finish_reason":null}]}\n\n`;
  stream += `${head}{"content":" \\u00e9\\t\\/"},"logprobs":null,"finish_reason":null}]}\n\n`; // escapes JSON.stringify never writes
  stream += `${head}{"content":""},"logprobs":null,"finish_reason":"stop","stop_reason":null}]}\n\ndata: [DONE]\n\n`;
  const want = `${pieces.join('')} \u00e9\t/`;
  assert.equal(reassembled(stream, true), want);
  const bytes = Buffer.from(stream);
  for (let k = 0; k <= bytes.length; k++) assert.equal(relayed([bytes.subarray(0, k), bytes.subarray(k)], true, true).replyText(), want, `split at ${k}`);
});

void test('replyText reads a non-streaming body\'s message content (chat) or text (completions)', () => {
  for (const [file, chat] of [['chat.json', true], ['completion.json', false]] as const) {
    const body = fixture(file);
    const parsed = JSON.parse(body) as { choices: Array<{ message?: { content: string }; text?: string }> };
    const want = chat ? parsed.choices[0]!.message!.content : parsed.choices[0]!.text;
    assert.ok(want !== undefined && want.length > 0);
    assert.equal(replyText(Buffer.from(body), chat), want);
  }
  const chatBody = (content: string | null, extra: Record<string, unknown> = {}): Buffer => Buffer.from(JSON.stringify({
    id: 'c', object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content, ...extra }, finish_reason: 'stop' }],
    usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
  }));
  const tricky = 'He said "content":"x", then\n\ttabbed \\ and \u00e9 \u{1F600}.';
  assert.equal(replyText(chatBody(tricky), true), tricky);
  assert.equal(replyText(chatBody(null, { tool_calls: [{ id: 't', type: 'function', function: { name: 'f', arguments: '{"content":"no"}' } }] }), true), null);
  assert.equal(replyText(Buffer.from('not json'), true), null);
  // Key order other than vLLM's still works (the full parse).
  assert.equal(replyText(Buffer.from('{"choices":[{"message":{"content":"plain","role":"assistant"}}]}'), true), 'plain');
});
