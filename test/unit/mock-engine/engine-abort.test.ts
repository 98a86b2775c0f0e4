import { test } from 'node:test';
import assert from 'node:assert/strict';
import { addRecorded, engineOnVirtualClock } from './harness.ts';

void test('aborting a running request frees its blocks at once and it gets onFinish(abort) and nothing after', () => {
  const { engine, clock } = engineOnVirtualClock({ profile: 'tiny' });
  const usable = engine.config.numGpuBlocks - 1;
  const r = addRecorded(engine, clock, { promptTokens: 300, outputTokens: 500 });
  clock.runUntil(() => r.tokenIndexes.length >= 10);
  const held = usable - engine.snapshot().free_blocks;
  assert.equal(held, Math.ceil((300 + 10) / 16)); // prompt plus the tokens computed so far
  assert.ok(engine.stats().kv_cache_usage_perc > 0);

  assert.equal(engine.abort(r.id), true);
  assert.equal(r.finishReason, 'abort');
  assert.equal(engine.snapshot().free_blocks, usable, 'freed synchronously, not at the next step');
  assert.equal(engine.stats().kv_cache_usage_perc, 0);
  const tokensAtAbort = r.tokenIndexes.length;
  clock.runUntilIdle();
  assert.equal(r.tokenIndexes.length, tokensAtAbort, 'no token after the abort (the in-flight step is dropped)');
  assert.equal(r.finishCalls, 1);
  const snap = engine.snapshot();
  assert.equal(snap.aborted, 1);
  assert.equal(snap.running, 0);
  assert.equal(snap.requests.find((x) => x.id === r.id)?.state, 'aborted');
  assert.equal(engine.stats().request_success_total.abort, 1);
  assert.equal(engine.abort(r.id), false, 'a second abort is a no-op');
});

void test('aborting a request mid-prefill or while queued removes it, and the others carry on', () => {
  const { engine, clock } = engineOnVirtualClock({ profile: 'tiny', maxNumSeqs: 1 });
  const a = addRecorded(engine, clock, { promptTokens: 1000, outputTokens: 5 }); // 4 chunks of 256
  const b = addRecorded(engine, clock, { promptTokens: 50, outputTokens: 5 });
  const c = addRecorded(engine, clock, { promptTokens: 50, outputTokens: 5 });
  clock.runUntil(() => engine.snapshot().requests.find((x) => x.id === a.id)?.state === 'running');
  assert.equal(engine.snapshot().waiting, 2);
  assert.equal(engine.abort(b.id), true);
  assert.equal(engine.snapshot().waiting, 1);
  assert.equal(engine.abort(a.id), true); // still prefilling: never got a first token
  clock.runUntilIdle();
  assert.equal(a.firstTokenCalls, 0);
  assert.equal(b.firstTokenCalls, 0);
  assert.deepEqual(c.tokenIndexes, [0, 1, 2, 3, 4]);
  assert.equal(c.finishReason, 'stop');
  assert.equal(engine.snapshot().free_blocks, engine.config.numGpuBlocks - 1);
  assert.deepEqual(engine.stats().request_success_total, { stop: 1, length: 0, abort: 2 });
});

void test('abort of an unknown or finished id returns false', () => {
  const { engine, clock } = engineOnVirtualClock({ profile: 'tiny' });
  const r = addRecorded(engine, clock, { promptTokens: 20, outputTokens: 2 });
  clock.runUntilIdle();
  assert.equal(engine.abort(r.id), false);
  assert.equal(engine.abort('nope'), false);
  assert.equal(r.finishReason, 'stop');
});

void test('a handler may abort another request whose token is due in the same step: that request gets nothing more', () => {
  const { engine, clock } = engineOnVirtualClock({ profile: 'tiny' });
  let victimId = '';
  const killer = addRecorded(engine, clock, { promptTokens: 20, outputTokens: 5 }, (_rec, kind) => {
    if (kind === 'token' && victimId) engine.abort(victimId);
  });
  const victim = addRecorded(engine, clock, { promptTokens: 20, outputTokens: 5 });
  victimId = victim.id;
  clock.runUntilIdle();
  assert.equal(killer.tokenIndexes.length, 5);
  assert.equal(victim.finishReason, 'abort');
  assert.equal(victim.finishCalls, 1);
  assert.equal(victim.tokenIndexes.length, 0);
  assert.equal(victim.firstTokenCalls, 0);
});

void test('close() aborts everything in the engine and stops stepping', () => {
  const { engine, clock } = engineOnVirtualClock({ profile: 'tiny' });
  const a = addRecorded(engine, clock, { promptTokens: 20, outputTokens: 50 });
  const b = addRecorded(engine, clock, { promptTokens: 20, outputTokens: 50 });
  clock.advance(5);
  engine.close();
  assert.equal(a.finishReason, 'abort');
  assert.equal(b.finishReason, 'abort');
  assert.equal(clock.pendingTimers, 0);
  assert.throws(() => addRecorded(engine, clock, { promptTokens: 20, outputTokens: 1 }), /closed/);
});

void test('a throwing event handler surfaces its error but the engine keeps serving the other requests', () => {
  const { engine, clock } = engineOnVirtualClock({ profile: 'tiny' });
  const bad = addRecorded(engine, clock, { promptTokens: 20, outputTokens: 3 }, (_rec, kind) => {
    if (kind === 'first') throw new Error('handler bug');
  });
  const good = addRecorded(engine, clock, { promptTokens: 20, outputTokens: 3 });
  assert.throws(() => clock.runUntilIdle(), /handler bug/);
  clock.runUntilIdle();
  assert.equal(good.tokenIndexes.length, 3);
  assert.equal(good.finishReason, 'stop');
  assert.equal(bad.finishReason, 'stop');
  assert.equal(engine.snapshot().free_blocks, engine.config.numGpuBlocks - 1);
});
