// SSE timing: token arrival times, counts and usage from a stream fed in arbitrary chunks.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SseTimer, tpotMs } from '../../../native-bench/load/sse-timing.ts';

const head = '{"id":"c1","object":"chat.completion.chunk","model":"m","choices":';
const role = `data: ${head}[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}\n\n`;
const tok = (t: string, fr: string | null = null): string =>
  `data: ${head}[{"index":0,"delta":{"content":${JSON.stringify(t)}},"finish_reason":${fr ? JSON.stringify(fr) : 'null'}}]}\n\n`;
const usage = `data: ${head}[],"usage":{"prompt_tokens":1800,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":1504}}}\n\n`;
const done = 'data: [DONE]\n\n';

test('TTFT is the first event with text (not the role chunk); TPOT spreads last − first over tokens − 1', () => {
  const s = new SseTimer();
  s.push(role, 10);
  s.push(tok(' one'), 25);
  s.push(tok(' two'), 31);
  s.push(tok(' three', 'length') + usage + done, 45);
  const t = s.result();
  assert.equal(t.firstTokenMs, 25);
  assert.equal(t.lastTokenMs, 45);
  assert.equal(t.tokenEvents, 3);
  assert.equal(t.events, 6);
  assert.equal(t.done, true);
  assert.equal(t.errorCode, null);
  assert.deepEqual([t.promptTokens, t.completionTokens, t.cachedTokens], [1800, 3, 1504]);
  assert.equal(tpotMs(t), 10);
});

test('events split across chunks, even inside a multi-byte character, are timed when they complete', () => {
  const body = Buffer.from(role + tok(' héllo') + tok(' wörld') + done);
  const s = new SseTimer();
  // One byte per chunk: every boundary, including the middle of é and ö, is exercised.
  for (let i = 0; i < body.length; i++) s.push(body.subarray(i, i + 1), i);
  const t = s.result();
  assert.equal(t.tokenEvents, 2);
  assert.equal(t.done, true);
  const firstEnd = Buffer.byteLength(role + tok(' héllo')) - 1;
  assert.equal(t.firstTokenMs, firstEnd);
  assert.equal(t.lastTokenMs, Buffer.byteLength(role + tok(' héllo') + tok(' wörld')) - 1);
});

test('CRLF framing, comments and completions-style `text` choices are understood', () => {
  const s = new SseTimer();
  const frame = (data: string): string => `: keep-alive\r\ndata: ${data}\r\n\r\n`;
  s.push(frame('{"choices":[{"index":0,"text":" a","finish_reason":null}]}'), 1);
  s.push(frame('{"choices":[{"index":0,"text":" b","finish_reason":"stop"}]}') + frame('[DONE]'), 4);
  const t = s.result();
  assert.equal(t.tokenEvents, 2);
  assert.equal(t.done, true);
  assert.equal(tpotMs(t), 3);
});

test('an error event ends the stream without [DONE] and names its code', () => {
  const s = new SseTimer();
  s.push(role + tok(' x'), 5);
  s.push('data: {"error":{"message":"replica died","type":"server_error","param":null,"code":"upstream_unavailable"}}\n\n', 9);
  const t = s.result();
  assert.equal(t.done, false);
  assert.equal(t.errorCode, 'upstream_unavailable');
  assert.equal(t.tokenEvents, 1);
  assert.ok(Number.isNaN(tpotMs(t)), 'one token has no TPOT');
});

test('without a usage chunk TPOT counts token events; a stream with no tokens has no TTFT', () => {
  const s = new SseTimer();
  s.push(tok('a') + tok('b') + tok('c') + tok('d'), 0);
  s.push(tok('e'), 8);
  assert.equal(tpotMs(s.result()), 2);
  const empty = new SseTimer();
  empty.push(role + done, 3);
  assert.ok(Number.isNaN(empty.result().firstTokenMs));
});
