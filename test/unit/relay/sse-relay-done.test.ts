// The client's stream ends at [DONE], not at the upstream body's end, and never waits on a drain after that.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SseRelay } from '../../../src/relay/sse-relay.ts';
import { TextSink as Sink } from './text-sink.ts';

const frame = (o: unknown): string => `data: ${JSON.stringify(o)}\n\n`;

test('the response ends as soon as [DONE] is relayed, once, and reports no backpressure after it', () => {
  const sink = new Sink();
  const relay = new SseRelay(sink, true, false);
  assert.equal(relay.push(Buffer.from(frame({ choices: [{ index: 0, text: ' a', finish_reason: null }] }))), false);
  assert.equal(sink.ends, 0);
  sink.full = true; // the client is backpressured when [DONE] arrives
  const bp = relay.push(Buffer.from(frame({ choices: [{ index: 0, text: ' b', finish_reason: 'length' }] }) + 'data: [DONE]\n\n'));
  assert.equal(bp, false, 'nothing to wait for: the response is ended and uWS flushes the rest');
  assert.equal(sink.ends, 1);
  assert.ok(sink.bytes.endsWith('data: [DONE]\n\n'));
  relay.close();
  relay.fail({ code: 'upstream_error' });
  assert.equal(sink.ends, 1, 'close and fail after [DONE] change nothing');
  assert.equal(relay.tokens, 2);
  assert.equal(relay.finishReason, 'length');
});
