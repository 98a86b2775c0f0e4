// The Responses relay on the mock replica's own frames (responses-frames.ts builds vLLM's events): every event
// forwarded byte for byte however the reads split it, the first token only at the first delta, deltas
// counted, usage, id and output from response.completed, the stream ended there; an upstream error event
// replaced by the gateway's, and the finish reason derived from the output length.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ResponsesRelay } from '../../../src/relay/responses-relay.ts';
import { TextSink as Sink } from './text-sink.ts';
import { ResponseEvents, outputMessage, responseObject, type ResponseEcho } from '../../mock-replica/responses-frames.ts';

const echo: ResponseEcho = { id: 'resp_abc', createdAt: 1, model: 'm', instructions: null, maxOutputTokens: 8, previousResponseId: null, background: false };

/** A whole streamed response: opening, `words` deltas, closing with usage. */
function stream(words: string[], maxOutputTokens = 8): { opening: string; deltas: string[]; closing: string } {
  const ev = new ResponseEvents('msg_1');
  const e = { ...echo, maxOutputTokens };
  const opening = ev.opening(responseObject(e, 'in_progress', [], null)) + ev.itemAdded();
  const deltas = words.map((w) => ev.delta(w));
  const text = words.join('');
  const closing = ev.closing(text, responseObject(e, 'completed', [outputMessage('msg_1', text)], { inputTokens: 30, outputTokens: words.length, cachedTokens: 16 }));
  return { opening, deltas, closing };
}

test('relays every event unchanged, whatever the split; TTFT waits for the first delta; figures from response.completed', () => {
  const { opening, deltas, closing } = stream(['Hello', ' there', ' friend']);
  const whole = opening + deltas.join('') + closing;
  for (const cut of [1, 7, 50, 333]) {
    const sink = new Sink();
    const relay = new ResponsesRelay(sink, 8);
    relay.push(Buffer.from(opening.slice(0, cut)));
    relay.push(Buffer.from(opening.slice(cut)));
    assert.equal(relay.sawFirstToken, false, 'created / in_progress / item added are not tokens');
    assert.equal(relay.responseId, 'resp_abc', 'the id comes from response.created');
    const rest = deltas.join('') + closing;
    for (let i = 0; i < rest.length; i += cut) relay.push(Buffer.from(rest.slice(i, i + cut)));
    assert.equal(sink.bytes, whole);
    assert.equal(relay.sawFirstToken, true);
    assert.equal(relay.tokens, 3);
    assert.equal(relay.sawDone, true);
    assert.equal(sink.ends, 1, 'the client stream ends at response.completed');
    assert.deepEqual(relay.usage, { promptTokens: 30, completionTokens: 3, cachedTokens: 16 });
    assert.equal(relay.finishReason, 'stop');
    assert.equal(relay.replyText(), 'Hello there friend');
    assert.deepEqual(relay.figures?.outputTexts, ['Hello there friend']);
  }
});

test('output that used all of max_output_tokens finishes with length', () => {
  const { opening, deltas, closing } = stream(['a', 'b', 'c', 'd'], 4);
  const relay = new ResponsesRelay(new Sink(), 4);
  relay.push(Buffer.from(opening + deltas.join('') + closing));
  assert.equal(relay.finishReason, 'length');
});

test('an upstream error event is not forwarded: the gateway\'s own event ends the stream, no fake completion', () => {
  const { opening, deltas } = stream(['x', 'y']);
  const sink = new Sink();
  const relay = new ResponsesRelay(sink, 8);
  const err = `event: error\ndata: ${JSON.stringify({ error: { message: 'engine died', type: 'InternalServerError', param: null, code: 500 } })}\n\n`;
  relay.push(Buffer.from(opening + deltas[0]! + err + deltas[1]!));
  assert.equal(relay.upstreamError?.message, 'engine died');
  assert.equal(relay.tokens, 1, 'nothing after the error is relayed');
  assert.ok(!sink.bytes.includes('engine died'));
  relay.close();
  const last = sink.bytes.slice(sink.bytes.lastIndexOf('event: '));
  assert.match(last, /^event: error\ndata: /);
  const data = JSON.parse(last.split('\n')[1]!.slice(6)) as { type: string; code: string; message: string; error: { code: string } };
  assert.equal(data.type, 'error');
  assert.equal(data.code, 'upstream_error');
  assert.equal(data.error.code, 'upstream_error');
  assert.equal(data.message, 'engine died');
  assert.equal(sink.ends, 1);
});

test('a stream cut before its terminal event keeps its relayed delta count and is not done', () => {
  const { opening, deltas } = stream(['p', 'q', 'r']);
  const sink = new Sink();
  const relay = new ResponsesRelay(sink, 8);
  relay.push(Buffer.from(opening + deltas.join('')));
  assert.equal(relay.sawDone, false);
  assert.equal(relay.tokens, 3);
  assert.equal(relay.usage, null);
  relay.fail({ code: 'upstream_error', message: 'cut' });
  assert.match(sink.bytes, /event: error\ndata: \{"type":"error","code":"upstream_error","message":"cut"/);
});
