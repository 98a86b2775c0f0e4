// UpstreamAttempt.batch: the SSE events of one upstream read reach the client inside one cork (one send()),
// and a non-streaming attempt does not cork per read.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { ClientSink, HeaderList } from '../../../src/relay/client-sink.ts';
import { attemptHarness, type Harness } from './attempt-harness.ts';

/** A client sink that models uWS corking: nested corks run in place; each outermost cork is one send(). */
class CorkCountingSink implements ClientSink {
  aborted = false;
  started = false;
  sends = 0;
  writesOutsideCork = 0;
  bytes = '';
  private depth = 0;
  begin(_status: number, _headers: HeaderList): void { this.started = true; }
  write(chunk: Uint8Array | string): boolean {
    if (this.depth === 0) this.writesOutsideCork++;
    this.bytes += Buffer.from(chunk).toString();
    return true;
  }
  end(chunk?: Uint8Array | string): void {
    if (this.depth === 0) this.writesOutsideCork++;
    if (chunk !== undefined) this.bytes += Buffer.from(chunk).toString();
  }
  onDrain(): void {}
  setAbortHandler(): void {}
  cork(fn: () => void): void {
    if (this.depth === 0) this.sends++;
    this.depth++;
    try {
      fn();
    } finally {
      this.depth--;
    }
  }
}

function attempt(stream: boolean): Harness & { sink: CorkCountingSink } {
  const sink = new CorkCountingSink();
  return { ...attemptHarness(sink, { stream }), sink };
}

const event = (i: number): Buffer => Buffer.from(`data: {"choices":[{"index":0,"delta":{"content":"t${i}"},"finish_reason":null}]}\n\n`);

test('a read carrying 30 SSE events leaves in one send; the next read in one more', async () => {
  const { a, sink, outcome } = attempt(true);
  a.batch(() => {
    a.onStart(200);
    for (let i = 0; i < 30; i++) a.onData(event(i));
  });
  assert.equal(sink.sends, 1, 'one cork for the whole read, the per-event corks nested inside it');
  a.batch(() => {
    for (let i = 30; i < 40; i++) a.onData(event(i));
    a.onData(Buffer.from('data: [DONE]\n\n'));
    a.onEnd();
  });
  assert.equal(sink.sends, 2);
  assert.equal(sink.writesOutsideCork, 0);
  for (let i = 0; i < 40; i++) assert.ok(sink.bytes.includes(`"t${i}"`), `event ${i} relayed`);
  assert.ok(sink.bytes.endsWith('data: [DONE]\n\n'));
  assert.deepEqual(await outcome, { kind: 'sent', failure: null });
});

test('without batch() every event is its own cork (what batch() saves)', () => {
  const { a, sink } = attempt(true);
  a.onStart(200);
  for (let i = 0; i < 30; i++) a.onData(event(i));
  assert.equal(sink.sends, 30);
});

test('a non-streaming attempt is not corked per read: its body goes out once, at the end', async () => {
  const { a, sink, outcome } = attempt(false);
  a.batch(() => {
    a.onStart(200);
    a.onData(Buffer.from('{"choices":[],'));
  });
  assert.equal(sink.sends, 0, 'nothing written while the body is collected');
  a.batch(() => {
    a.onData(Buffer.from('"usage":{"prompt_tokens":3,"completion_tokens":2}}'));
    a.onEnd();
  });
  assert.equal(sink.sends, 1);
  assert.equal(sink.bytes, '{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}');
  assert.deepEqual(await outcome, { kind: 'sent', failure: null });
});
