// SseRelay against a recording ClientSink: events split across upstream chunks at every byte offset, usage
// chunk removal, error-event normalisation with no [DONE] after it, token counting for chat vs completions,
// finish_reason and usage extraction, and the backpressure flag.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { SseRelay, normaliseStreamError } from '../../../src/relay/sse-relay.ts';
import type { ClientSink, HeaderList } from '../../../src/relay/client-sink.ts';

/** Records every byte written and whether end() was called; write() reports backpressure on demand. */
class RecordingSink implements ClientSink {
  aborted = false;
  started = false;
  ended = false;
  writes: string[] = [];
  endChunk = '';
  /** write() returns false for these write indexes (0-based), as a backpressured uWS response does. */
  refuseWrites = new Set<number>();
  drainCallbacks: Array<() => void> = [];

  begin(_status: number, _headers: HeaderList): void {
    this.started = true;
  }

  write(chunk: Uint8Array | string): boolean {
    assert.equal(this.ended, false, 'no write after end');
    // Copy: the relay forwards views of the upstream buffer, which a socket may reuse.
    this.writes.push(typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8'));
    return !this.refuseWrites.has(this.writes.length - 1);
  }

  end(chunk?: Uint8Array | string): void {
    assert.equal(this.ended, false, 'end() once');
    this.ended = true;
    if (chunk !== undefined) this.endChunk = typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8');
  }

  onDrain(cb: () => void): void {
    this.drainCallbacks.push(cb);
  }

  setAbortHandler(): void {}

  cork(fn: () => void): void {
    fn();
  }

  /** Everything the client received. */
  get text(): string {
    return this.writes.join('') + this.endChunk;
  }
}

const fixture = (name: string): string => readFileSync(new URL(`../../fixtures/sse/${name}`, import.meta.url), 'utf8');
const events = (text: string): string[] => text.split('\n\n').filter(Boolean).map((e) => `${e}\n\n`);
const isUsageEvent = (e: string): boolean => e.includes('"choices":[]');

interface RunResult { sink: RecordingSink; relay: SseRelay }

function run(chunks: Buffer[], dropUsage: boolean, isChat: boolean, close = true): RunResult {
  const sink = new RecordingSink();
  const relay = new SseRelay(sink, dropUsage, isChat);
  for (const c of chunks) relay.push(c);
  if (close) relay.close();
  return { sink, relay };
}

/** Splits `bytes` into two chunks at every offset (and into single bytes), checking each run with `check`. */
function everySplit(text: string, check: (chunks: Buffer[], label: string) => void): void {
  const bytes = Buffer.from(text);
  for (let k = 0; k <= bytes.length; k++) check([bytes.subarray(0, k), bytes.subarray(k)], `split at ${k}`);
  check([...bytes].map((b) => Buffer.from([b])), 'one byte per chunk');
}

const STREAMS: Array<{ file: string; chat: boolean; tokens: number; finish: string; usage: { promptTokens: number; completionTokens: number; cachedTokens: number } | null }> = [
  { file: 'chat-stream-usage.txt', chat: true, tokens: 5, finish: 'length', usage: { promptTokens: 43, completionTokens: 5, cachedTokens: 0 } },
  { file: 'chat-stream-cached.txt', chat: true, tokens: 2, finish: 'length', usage: { promptTokens: 236, completionTokens: 2, cachedTokens: 224 } },
  { file: 'chat-stream-natural-stop.txt', chat: true, tokens: 9, finish: 'stop', usage: { promptTokens: 43, completionTokens: 9, cachedTokens: 0 } },
  { file: 'chat-stream.txt', chat: true, tokens: 5, finish: 'length', usage: null },
  { file: 'completion-stream-usage.txt', chat: false, tokens: 4, finish: 'length', usage: { promptTokens: 5, completionTokens: 4, cachedTokens: 0 } },
  { file: 'completion-stream.txt', chat: false, tokens: 4, finish: 'length', usage: null },
];

for (const s of STREAMS) {
  test(`${s.file}: identical output, counts and usage wherever the upstream chunks split (usage kept and dropped)`, () => {
    const text = fixture(s.file);
    const withoutUsage = events(text).filter((e) => !isUsageEvent(e)).join('');
    for (const dropUsage of [false, true]) {
      const expected = dropUsage ? withoutUsage : text;
      everySplit(text, (chunks, label) => {
        const { sink, relay } = run(chunks, dropUsage, s.chat);
        assert.equal(sink.text, expected, `${label}, dropUsage=${dropUsage}`);
        assert.equal(relay.tokens, s.tokens, label);
        assert.equal(relay.finishReason, s.finish, label);
        assert.deepEqual(relay.usage, s.usage, label);
        assert.equal(relay.sawDone, true);
        assert.equal(relay.upstreamError, null);
        assert.equal(relay.finished, true);
        assert.equal(sink.ended, true);
      });
    }
  });
}

test('a relayed event reaches the client as soon as its terminating blank line arrives, not later', () => {
  const evs = events(fixture('chat-stream-usage.txt'));
  const sink = new RecordingSink();
  const relay = new SseRelay(sink, false, true);
  relay.push(Buffer.from(evs[0]!.slice(0, -1))); // everything but the last \n
  assert.equal(sink.text, '', 'an unfinished event is held');
  relay.push(Buffer.from('\n'));
  assert.equal(sink.text, evs[0]);
  relay.push(Buffer.from(evs[1]! + evs[2]!.slice(0, 10)));
  assert.equal(sink.text, evs[0]! + evs[1]!);
  assert.equal(relay.tokens, 1);
});

test('a usage chunk whose counts are not numbers is no usage: billing falls back to the relayed tokens', () => {
  const text = fixture('chat-stream-usage.txt').replace(/"completion_tokens":\d+/, '"completion_tokens":"5"');
  assert.ok(text.includes('"completion_tokens":"5"'), 'fixture rewritten');
  const { relay } = run([Buffer.from(text)], false, true);
  assert.equal(relay.usage, null);
  assert.equal(relay.tokens, 5);
});

test('the usage chunk is removed when the client did not ask for it, and its figures are still read', () => {
  const text = fixture('chat-stream-cached.txt');
  const { sink, relay } = run([Buffer.from(text)], true, true);
  assert.ok(!sink.text.includes('"usage"'));
  assert.ok(sink.text.endsWith('data: [DONE]\n\n'));
  assert.deepEqual(relay.usage, { promptTokens: 236, completionTokens: 2, cachedTokens: 224 });
});

test('continuous usage stats on token chunks are not mistaken for the usage chunk', () => {
  const text = fixture('chat-stream-continuous-usage.txt');
  const { sink, relay } = run([Buffer.from(text)], true, true);
  assert.equal(relay.tokens, 3);
  assert.equal(sink.text.split('\n\n').filter(Boolean).length, 5, 'four token chunks and [DONE]; only the final usage chunk dropped');
  assert.deepEqual(relay.usage, { promptTokens: 43, completionTokens: 3, cachedTokens: 0 });
});

test('chat counts every content delta but not the role chunk; completions count every data event', () => {
  const chatEvent = (content: string): string => `data: {"choices":[{"index":0,"delta":{"content":"${content}"},"finish_reason":null}]}\n\n`;
  const role = 'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}\n\n';
  const chat = run([Buffer.from(role + chatEvent('a') + chatEvent('b') + chatEvent('c'))], false, true, false);
  assert.equal(chat.relay.tokens, 3);
  assert.equal(chat.relay.dataEvents, 4);
  const cmpl = (t: string): string => `data: {"choices":[{"index":0,"text":"${t}","finish_reason":null}]}\n\n`;
  const c = run([Buffer.from(cmpl('a') + cmpl('b'))], false, false, false);
  assert.equal(c.relay.tokens, 2);
  assert.equal(c.relay.sawDone, false);
  assert.equal(c.relay.finished, false);
});

test('a cancelled stream counts only the tokens relayed so far (no usage chunk arrived)', () => {
  const evs = events(fixture('chat-stream-usage.txt'));
  const { relay } = run([Buffer.from(evs.slice(0, 4).join(''))], true, true, false);
  assert.equal(relay.tokens, 3);
  assert.equal(relay.usage, null);
  assert.equal(relay.finishReason, null);
});

test('comments and non-data fields pass through and are not counted', () => {
  const text = ': keep-alive\n\nevent: ping\n\n' + fixture('completion-stream.txt');
  const { sink, relay } = run([Buffer.from(text)], true, false);
  assert.equal(sink.text, text);
  assert.equal(relay.tokens, 4);
});

const VLLM_MID_STREAM_ERROR = 'data: {"error":{"message":"engine overloaded, request aborted","type":"BadRequestError","param":null,"code":400}}\n\n';

test('an upstream error event becomes one gateway error event with a string code, and no [DONE] follows', () => {
  const evs = events(fixture('chat-stream.txt'));
  const upstream = evs.slice(0, 3).join('') + VLLM_MID_STREAM_ERROR + 'data: [DONE]\n\n';
  everySplit(upstream, (chunks, label) => {
    const { sink, relay } = run(chunks, true, true);
    assert.ok(relay.upstreamError !== null, label);
    assert.equal(relay.tokens, 2, label);
    const frames = sink.text.split('\n\n').filter(Boolean);
    assert.equal(frames.length, 4, `${label}: three relayed events and one error event`);
    assert.equal(sink.text.startsWith(evs.slice(0, 3).join('')), true, label);
    assert.ok(!sink.text.includes('[DONE]'), `${label}: never a [DONE] after an error`);
    const err = JSON.parse(frames[3]!.slice(6)) as { error: { message: string; type: string; code: string; param: null } };
    assert.deepEqual(err, { error: { message: 'engine overloaded, request aborted', type: 'server_error', param: null, code: 'upstream_error' } });
    assert.equal(sink.ended, true);
  });
});

test('anything the upstream sends after its error event is not relayed', () => {
  const evs = events(fixture('completion-stream.txt'));
  const { sink } = run([Buffer.from(VLLM_MID_STREAM_ERROR + evs[0]! + evs[1]!)], false, false);
  assert.equal(sink.text.split('\n\n').filter(Boolean).length, 1);
  assert.ok(sink.text.startsWith('data: {"error"'));
});

test('after an upstream error event, bytes arriving in a later upstream chunk are not relayed', () => {
  // The error event and the start of vLLM's trailing [DONE] in one chunk, the rest of [DONE] in the next:
  // the second chunk's "ata: [DONE]" must not reach the client as a stray event.
  const evs = events(fixture('chat-stream.txt'));
  const { sink } = run([Buffer.from(evs[0]! + evs[1]! + VLLM_MID_STREAM_ERROR + 'd'), Buffer.from('ata: [DONE]\n\n')], true, true);
  assert.equal(sink.text.split('\n\n').filter(Boolean).length, 3, sink.text);
  assert.ok(!sink.text.includes('DONE'), sink.text);
  assert.ok(sink.text.endsWith('"code":"upstream_error"}}\n\n'));
});

test('fail() ends the stream with the given error event and no [DONE]', () => {
  const evs = events(fixture('chat-stream.txt'));
  const sink = new RecordingSink();
  const relay = new SseRelay(sink, true, true);
  relay.push(Buffer.from(evs.slice(0, 3).join('') + evs[3]!.slice(0, 20)));
  relay.fail({ code: 'upstream_error', message: 'The replica connection failed mid-stream.' });
  assert.equal(sink.ended, true);
  assert.equal(sink.endChunk, 'data: {"error":{"message":"The replica connection failed mid-stream.","type":"server_error","param":null,"code":"upstream_error"}}\n\n');
  assert.equal(sink.text, evs.slice(0, 3).join('') + sink.endChunk, 'a partial event is never forwarded, no [DONE]');
});

const STREAM_ERRORS: Array<[string, string]> = [
  ['{"error":{"message":"boom","type":"BadRequestError","code":400}}', 'boom'],
  ['{"error":"flat string error"}', 'flat string error'],
  ['{"error":{"code":500}}', 'The replica failed while streaming the response.'],
  ['not json', 'The replica failed while streaming the response.'],
];

for (const [json, message] of STREAM_ERRORS) {
  test(`normaliseStreamError(${json}) keeps "${message}" as an upstream_error`, () => {
    assert.deepEqual(normaliseStreamError(json), { code: 'upstream_error', message });
  });
}

test('push returns true when a client write was backpressured in that chunk, false otherwise', () => {
  const evs = events(fixture('completion-stream.txt'));
  const sink = new RecordingSink();
  sink.refuseWrites.add(1);
  const relay = new SseRelay(sink, false, false);
  assert.equal(relay.push(Buffer.from(evs[0]!)), false, 'first write accepted');
  assert.equal(relay.push(Buffer.from(evs[1]!)), true, 'second write backpressured');
  assert.equal(relay.push(Buffer.from(evs[2]!)), false, 'the flag is per push, not sticky');
  assert.equal(relay.push(Buffer.from(evs[3]!.slice(0, 5))), false, 'nothing written, nothing backpressured');
  assert.equal(sink.writes.length, 3);
});

test('forwarded bytes are written once per upstream chunk when no event is dropped (no per-event writes)', () => {
  const text = fixture('chat-stream.txt');
  const { sink } = run([Buffer.from(text)], true, true);
  assert.equal(sink.writes.length, 1);
});

test('a partial event held between chunks survives the upstream reusing its buffer', () => {
  const evs = events(fixture('completion-stream.txt'));
  const sink = new RecordingSink();
  const relay = new SseRelay(sink, false, false);
  const buf = Buffer.from(evs[0]! + evs[1]!.slice(0, 30));
  relay.push(buf);
  buf.fill(0x78); // the socket layer reuses the buffer
  relay.push(Buffer.from(evs[1]!.slice(30)));
  assert.equal(sink.text, evs[0]! + evs[1]!);
});
