// UpstreamAttempt (src/pipeline/upstream-attempt.ts) driven directly with a recording sink and a
// real in-flight ledger (attempt-harness.ts), for the outcomes at the edge of "after the first byte".
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { ClientSink, HeaderList } from '../../../src/relay/client-sink.ts';
import { attemptHarness, type Harness } from './attempt-harness.ts';

class RecordingSink implements ClientSink {
  aborted = false;
  started = false;
  ended = false;
  status = 0;
  body = '';
  begin(status: number, _h: HeaderList): void {
    if (this.started) return;
    this.started = true;
    this.status = status;
  }
  write(chunk: Uint8Array | string): boolean {
    assert.ok(!this.ended, 'write after end');
    this.body += typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8');
    return true;
  }
  end(chunk?: Uint8Array | string): void {
    if (this.ended) return;
    if (chunk !== undefined) this.write(chunk);
    this.started = true;
    this.ended = true;
  }
  onDrain(_cb: () => void): void {}
  setAbortHandler(_cb: () => void): void {}
  cork(fn: () => void): void {
    fn();
  }
}

function attempt(stream: boolean): Harness & { sink: RecordingSink } {
  const sink = new RecordingSink();
  return { ...attemptHarness(sink, { stream }), sink };
}

const frame = (o: unknown): string => `data: ${JSON.stringify(o)}\n\n`;
const STREAM =
  frame({ choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] }) +
  frame({ choices: [{ index: 0, delta: { content: 'Hi' }, finish_reason: null }] }) +
  frame({ choices: [{ index: 0, delta: { content: '!' }, finish_reason: 'stop' }] }) +
  frame({ choices: [], usage: { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 } }) +
  'data: [DONE]\n\n';

test('a clean stream ends with [DONE], usage figures taken, outcome sent without failure', async () => {
  const { a, sink, ctx, outcome } = attempt(true);
  a.onStart(200);
  a.onData(Buffer.from(STREAM));
  a.onEnd();
  assert.equal(sink.status, 200);
  assert.ok(sink.body.endsWith('data: [DONE]\n\n'));
  assert.ok(!sink.body.includes('"usage"'), 'usage chunk stripped when not asked for');
  assert.deepEqual(await outcome, { kind: 'sent', failure: null });
  assert.equal(ctx.outputTokens, 2);
  assert.equal(ctx.finishReason, 'stop');
});

test('a connection reset after the replica already sent [DONE] does not append an error event after [DONE]', async () => {
  const { a, sink, ctx, outcome } = attempt(true);
  a.onStart(200);
  a.onData(Buffer.from(STREAM));
  // The socket fails before the chunked terminator arrives (replica killed, keep-alive race): the client
  // already has the whole answer and its [DONE].
  const err = Object.assign(new Error('other side closed'), { code: 'UND_ERR_SOCKET' });
  a.onError('reset', err);
  assert.ok(sink.ended);
  const afterDone = sink.body.slice(sink.body.indexOf('data: [DONE]\n\n') + 'data: [DONE]\n\n'.length);
  assert.equal(afterDone, '', `bytes after [DONE]: ${JSON.stringify(afterDone)}`);
  assert.equal(ctx.code, null, 'a completed stream is not an upstream_error');
  assert.deepEqual(await outcome, { kind: 'sent', failure: null });
});

test('a reset before [DONE] after the first byte ends with one error event and no retry', async () => {
  const { a, sink, outcome } = attempt(true);
  a.onStart(200);
  a.onData(Buffer.from(STREAM.slice(0, STREAM.indexOf('data: {"choices":[{"index":0,"delta":{"content":"!"'))));
  a.onError('reset', Object.assign(new Error('reset'), { code: 'ECONNRESET' }));
  assert.equal((sink.body.match(/data: \{"error"/g) ?? []).length, 1);
  assert.ok(!sink.body.includes('[DONE]'));
  assert.deepEqual(await outcome, { kind: 'sent', failure: 'mid_stream' });
});

test('a 5xx before the first byte is a retry and touches nothing on the client', async () => {
  const { a, sink, outcome } = attempt(true);
  a.onStart(500);
  a.onData(Buffer.from('{"error":{"message":"boom","type":"InternalServerError","code":500}}'));
  a.onEnd();
  assert.equal(sink.started, false);
  assert.equal((await outcome).kind, 'retry');
});
