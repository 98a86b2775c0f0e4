// A routing policy that learns finished replies hears `finished` with the reply's block hashes: the attempt
// hands the reply's text (a stream's collected deltas, a JSON body's message content) and its finish reason
// to plan.replies after the response ended; a reply cut short, failed or finished otherwise gets none.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { ReplyHashing } from '../../../src/pipeline/upstream-attempt.ts';
import type { ClientSink, HeaderList } from '../../../src/relay/client-sink.ts';
import { attemptHarness } from './attempt-harness.ts';

class NullSink implements ClientSink {
  aborted = false;
  started = false;
  ended = false;
  begin(_s: number, _h: HeaderList): void { this.started = true; }
  write(): boolean { return true; }
  end(): void { this.started = true; this.ended = true; }
  onDrain(): void {}
  setAbortHandler(): void {}
  cork(fn: () => void): void { fn(); }
}

/** Records what it was asked to hash and whether the client's response had ended by then. */
class RecordingHasher implements ReplyHashing {
  calls: Array<{ text: string; finish: string; responseEnded: boolean }> = [];
  constructor(private readonly sink: NullSink) {}
  hash(text: string, finishReason: 'stop' | 'length'): Promise<Float64Array> {
    this.calls.push({ text, finish: finishReason, responseEnded: this.sink.ended });
    return Promise.resolve(Float64Array.from([text.length, 7]));
  }
}

const frame = (o: unknown): string => `data: ${JSON.stringify(o)}\n\n`;
const role = frame({ choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] });
const token = (content: string, finish: string | null = null): string => frame({ choices: [{ index: 0, delta: { content }, finish_reason: finish }] });
const usage = frame({ choices: [], usage: { prompt_tokens: 40, completion_tokens: 4, prompt_tokens_details: { cached_tokens: 32 } } });

function setup(stream: boolean): { h: ReturnType<typeof attemptHarness>; hasher: RecordingHasher } {
  const sink = new NullSink();
  const hasher = new RecordingHasher(sink);
  return { h: attemptHarness(sink, { stream, promptTokens: 40, replies: hasher }), hasher };
}

const settled = (): Promise<void> => new Promise((r) => setImmediate(r));

for (const finish of ['stop', 'length'] as const) {
  test(`a stream that ends with ${finish}: its text is hashed after the response ended, and finished carries the hashes`, async () => {
    const { h, hasher } = setup(true);
    h.a.onStart(200);
    h.a.onData(Buffer.from(role + token('It')));
    h.a.onData(Buffer.from(token(' is') + token(' "so"\n') + token('', finish) + usage + 'data: [DONE]\n\n'));
    h.a.onEnd();
    assert.deepEqual(await h.outcome, { kind: 'sent', failure: null });
    await settled();
    assert.deepEqual(hasher.calls, [{ text: 'It is "so"\n', finish, responseEnded: true }]);
    assert.deepEqual(h.feedback, ['dispatched', 'firstToken ok', 'finished 32 11,7']);
  });
}

test('a JSON body: the message content is hashed after the body was sent', async () => {
  const { h, hasher } = setup(false);
  h.a.onStart(200);
  h.a.onData(Buffer.from(JSON.stringify({
    id: 'x', object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: 'Sure, here.' }, finish_reason: 'length' }],
    usage: { prompt_tokens: 40, completion_tokens: 3, prompt_tokens_details: { cached_tokens: 16 } },
  })));
  h.a.onEnd();
  assert.deepEqual(await h.outcome, { kind: 'sent', failure: null });
  await settled();
  assert.deepEqual(hasher.calls, [{ text: 'Sure, here.', finish: 'length', responseEnded: true }]);
  assert.deepEqual(h.feedback, ['dispatched', 'firstToken ok', 'finished 16 11,7']);
});

test('no hashes for a stream cut short, an upstream error event, a tool call, or a 5xx', async () => {
  const cut = setup(true);
  cut.h.a.onStart(200);
  cut.h.a.onData(Buffer.from(role + token('It') + token(' is')));
  cut.h.a.onError('reset', new Error('socket reset'));
  assert.deepEqual(await cut.h.outcome, { kind: 'sent', failure: 'mid_stream' });

  const errored = setup(true);
  errored.h.a.onStart(200);
  errored.h.a.onData(Buffer.from(role + token('It') + 'data: {"error":{"message":"boom","code":500}}\n\n'));
  errored.h.a.onEnd();
  assert.deepEqual(await errored.h.outcome, { kind: 'sent', failure: 'mid_stream' });

  const tool = setup(true);
  tool.h.a.onStart(200);
  tool.h.a.onData(Buffer.from(role + token('') + frame({ choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }] }) + 'data: [DONE]\n\n'));
  tool.h.a.onEnd();
  assert.deepEqual(await tool.h.outcome, { kind: 'sent', failure: null });

  const failed = setup(false);
  failed.h.a.onStart(500);
  failed.h.a.onData(Buffer.from('{"error":{"message":"x","type":"InternalServerError","code":500}}'));
  failed.h.a.onEnd();
  assert.equal((await failed.h.outcome).kind, 'retry');

  await settled();
  for (const { h, hasher } of [cut, errored, tool, failed]) {
    assert.deepEqual(hasher.calls, []);
    assert.equal(h.feedback.at(-1)!.endsWith(' null'), true, h.feedback.join(' | '));
  }
});
