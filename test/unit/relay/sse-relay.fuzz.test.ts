// Property-based tests of the SSE relay: a valid vLLM event stream with arbitrary token texts, split into
// chunks anywhere, reaches the client byte for byte as the unsplit stream does (usage chunk kept or dropped),
// with the same token count, usage, finish reason and reply text; arbitrary bytes in arbitrary chunks never
// throw and end the client response exactly once. Bounded runs from a fixed seed (test/helpers/fuzz.ts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { check, cuts, fc, splitAt } from '../../helpers/fuzz.ts';
import { SseRelay } from '../../../src/relay/sse-relay.ts';
import type { ClientSink, HeaderList } from '../../../src/relay/client-sink.ts';

/** Records what the client would receive; fails on a write after end or a second end. */
class Sink implements ClientSink {
  aborted = false;
  started = false;
  ended = false;
  private parts: Buffer[] = [];
  begin(_s: number, _h: HeaderList): void {
    this.started = true;
  }
  write(chunk: Uint8Array | string): boolean {
    assert.equal(this.ended, false, 'write after end');
    this.parts.push(Buffer.from(chunk)); // a copy: the relay forwards views of the upstream buffer
    return true;
  }
  end(chunk?: Uint8Array | string): void {
    assert.equal(this.ended, false, 'end twice');
    this.ended = true;
    if (chunk !== undefined) this.parts.push(Buffer.from(chunk));
  }
  onDrain(): void {}
  setAbortHandler(): void {}
  cork(fn: () => void): void {
    fn();
  }
  get bytes(): Buffer {
    return Buffer.concat(this.parts);
  }
}

const HEAD = 'data: {"id":"chatcmpl-f","object":"chat.completion.chunk","created":0,"model":"m","choices":[';
const token = (t: string, finish: string | null): string =>
  `${HEAD}{"index":0,"delta":{"content":${JSON.stringify(t)}},"logprobs":null,"finish_reason":${finish === null ? 'null' : `"${finish}","stop_reason":null`}}]}\n\n`;

/** A chat stream as vLLM writes it (docs/vllm-facts.md "Wire format"), and the same without its usage chunk. */
function chatStream(tokens: string[], prompt: number, finish: string): { full: string; withoutUsage: string } {
  const role = `${HEAD}{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}\n\n`;
  const body = tokens.map((t, i) => token(t, i === tokens.length - 1 ? finish : null)).join('');
  const usage = `${HEAD}],"usage":{"prompt_tokens":${prompt},"total_tokens":${prompt + tokens.length},"completion_tokens":${tokens.length}}}\n\n`;
  const done = 'data: [DONE]\n\n';
  return { full: role + body + usage + done, withoutUsage: role + body + done };
}

function relay(chunks: Buffer[], dropUsage: boolean, isChat: boolean, collectText: boolean): { sink: Sink; r: SseRelay } {
  const sink = new Sink();
  const r = new SseRelay(sink, dropUsage, isChat, collectText);
  for (const c of chunks) r.push(c);
  r.close();
  return { sink, r };
}

const tokenText = fc.string({ unit: 'binary', minLength: 1, maxLength: 12 });

test('any split of a valid chat stream: the same bytes, token count, usage, finish reason and reply text', () => {
  const stream = fc.record({
    tokens: fc.array(tokenText, { minLength: 1, maxLength: 24 }),
    prompt: fc.integer({ min: 1, max: 100_000 }),
    finish: fc.constantFrom('stop', 'length'),
    dropUsage: fc.boolean(),
    collectText: fc.boolean(),
  }).chain((s) => {
    const text = chatStream(s.tokens, s.prompt, s.finish);
    return fc.tuple(fc.constant({ ...s, ...text }), cuts(Buffer.byteLength(text.full), 16));
  });
  check(fc.property(stream, ([s, at]) => {
    const bytes = Buffer.from(s.full);
    const { sink, r } = relay(splitAt(bytes, at), s.dropUsage, true, s.collectText);
    assert.equal(sink.bytes.toString(), s.dropUsage ? s.withoutUsage : s.full);
    assert.equal(r.tokens, s.tokens.length);
    assert.deepEqual(r.usage, { promptTokens: s.prompt, completionTokens: s.tokens.length, cachedTokens: 0 });
    assert.equal(r.finishReason, s.finish);
    assert.equal(r.sawDone, true);
    assert.equal(r.upstreamError, null);
    if (s.collectText) assert.equal(r.replyText(), s.tokens.join(''));
    assert.equal(sink.ended, true);
  }), 300);
});

test('any split of the recorded vLLM streams (chat and completions) gives the unsplit output', () => {
  const files: Array<[string, boolean]> = [['chat-stream-usage.txt', true], ['chat-stream-cached.txt', true], ['completion-stream-usage.txt', false], ['errors.txt', true]];
  const streams = files.map(([f, chat]) => ({ bytes: readFileSync(new URL(`../../fixtures/sse/${f}`, import.meta.url)), chat }));
  const arb = fc.constantFrom(...streams).chain((s) => fc.tuple(fc.constant(s), cuts(s.bytes.length, 24), fc.boolean()));
  check(fc.property(arb, ([s, at, dropUsage]) => {
    const whole = relay([s.bytes], dropUsage, s.chat, true);
    const split = relay(splitAt(s.bytes, at), dropUsage, s.chat, true);
    assert.deepEqual(split.sink.bytes, whole.sink.bytes);
    assert.equal(split.r.tokens, whole.r.tokens);
    assert.deepEqual(split.r.usage, whole.r.usage);
    assert.equal(split.r.finishReason, whole.r.finishReason);
    assert.deepEqual(split.r.upstreamError, whole.r.upstreamError);
    assert.equal(split.r.replyText(), whole.r.replyText());
  }), 300);
});

test('arbitrary bytes (with SSE-looking pieces) in arbitrary chunks: no throw, the client response ends once', () => {
  const piece = fc.oneof(
    fc.uint8Array({ maxLength: 40 }).map((a) => Buffer.from(a)),
    fc.constantFrom('data: ', '\n\n', '\n', 'data: [DONE]\n\n', 'data: {"error":{"message":"x"}}\n\n', '"finish_reason":"', '"choices":[]', '"usage":{"prompt_tokens":', '"content":"', '\\u', '\\', '"').map((s) => Buffer.from(s)),
    tokenText.map((t) => Buffer.from(token(t, null))),
  );
  const arb = fc.array(piece, { maxLength: 30 }).map((ps) => Buffer.concat(ps)).chain((b) => fc.tuple(fc.constant(b), cuts(b.length, 10), fc.boolean(), fc.boolean(), fc.boolean()));
  check(fc.property(arb, ([bytes, at, dropUsage, isChat, collect]) => {
    const { sink, r } = relay(splitAt(bytes, at), dropUsage, isChat, collect);
    assert.equal(sink.ended, true);
    assert.ok(r.tokens >= 0);
    r.replyText();
  }), 400);
});
