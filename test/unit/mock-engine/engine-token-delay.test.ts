// A request with tokenDelayMs (the HTTP mock's `slow` fault): held out of the steps between its tokens, still
// in the engine with its blocks while it runs, so an abort mid-stream finds it; other requests are not slowed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { addRecorded, engineOnVirtualClock } from './harness.ts';

void test('each token of a held request comes at least tokenDelayMs after the one before (the first: after arrival)', () => {
  const { engine, clock } = engineOnVirtualClock({ profile: 'tiny' });
  const r = addRecorded(engine, clock, { promptTokens: 40, outputTokens: 6, tokenDelayMs: 50 });
  clock.runUntilIdle();
  assert.equal(r.finishReason, 'stop');
  assert.deepEqual(r.tokenIndexes, [0, 1, 2, 3, 4, 5]);
  assert.ok(r.firstTokenMs >= r.addedMs + 50, `first token at ${r.firstTokenMs} ms`);
  for (let i = 1; i < r.tokenMs.length; i++) {
    const gap = r.tokenMs[i]! - r.tokenMs[i - 1]!;
    // At least the delay, at most the delay plus the one step that computes the token (~1 ms on tiny).
    assert.ok(gap >= 50 && gap < 55, `token ${i} came ${gap} ms after token ${i - 1}`);
  }
  // While held the engine does not spin: one step per token (the first is the prefill).
  assert.equal(engine.steps, 6);
});

void test('a held request stays running with its blocks between tokens, and an abort then frees them', () => {
  const { engine, clock } = engineOnVirtualClock({ profile: 'tiny' });
  const usable = engine.config.numGpuBlocks - 1;
  const r = addRecorded(engine, clock, { promptTokens: 300, outputTokens: 1000, tokenDelayMs: 10 });
  clock.runUntil(() => r.tokenIndexes.length >= 3);
  clock.advance(5); // between two tokens: held, not computing
  const snap = engine.snapshot();
  assert.equal(snap.running, 1);
  assert.equal(snap.requests.find((x) => x.id === r.id)?.state, 'running');
  assert.equal(usable - snap.free_blocks, Math.ceil((300 + 3) / 16), 'its blocks stay held between tokens');
  assert.equal(engine.abort(r.id), true);
  assert.equal(r.finishReason, 'abort');
  assert.equal(engine.snapshot().free_blocks, usable);
  clock.runUntilIdle();
  assert.equal(r.tokenIndexes.length, 3, 'nothing after the abort');
});

void test('other requests run at full speed beside a held one, and a request added while the engine waits starts at once', () => {
  const { engine, clock } = engineOnVirtualClock({ profile: 'tiny' });
  const held = addRecorded(engine, clock, { promptTokens: 40, outputTokens: 3, tokenDelayMs: 200 });
  clock.runUntil(() => held.tokenIndexes.length === 1);
  clock.advance(50); // the engine is idle, waiting for the held request's next token
  const stepsBefore = engine.steps;
  const fast = addRecorded(engine, clock, { promptTokens: 40, outputTokens: 20 });
  clock.runUntil(() => fast.finishCalls === 1);
  assert.ok(fast.firstTokenMs - fast.addedMs < 5, `the new request's first token came ${fast.firstTokenMs - fast.addedMs} ms after it was added`);
  assert.ok(fast.finishMs - fast.addedMs < 40, `20 tokens in ${fast.finishMs - fast.addedMs} ms`);
  assert.equal(engine.steps - stepsBefore, 20, 'the held request was in none of those steps');
  assert.equal(held.tokenIndexes.length, 1);
  clock.runUntilIdle();
  assert.deepEqual(held.tokenIndexes, [0, 1, 2]);
  assert.ok(held.tokenMs[1]! - held.tokenMs[0]! >= 200);
  assert.deepEqual(engine.audit(), []);
});

void test('a held request waiting for admission does not block the queue behind it', () => {
  const { engine, clock } = engineOnVirtualClock({ profile: 'tiny' });
  const held = addRecorded(engine, clock, { promptTokens: 40, outputTokens: 2, tokenDelayMs: 100 });
  const next = addRecorded(engine, clock, { promptTokens: 40, outputTokens: 2 });
  clock.runUntil(() => next.finishCalls === 1);
  assert.ok(next.finishMs < 10, `the request behind finished at ${next.finishMs} ms`);
  assert.equal(held.firstTokenCalls, 0);
  clock.runUntilIdle();
  assert.ok(held.firstTokenMs >= 100);
  assert.equal(held.finishReason, 'stop');
});
