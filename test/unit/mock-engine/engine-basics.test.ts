import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RealClock, VirtualClock } from '../../mock-replica/engine/clocks.ts';
import { MockEngine } from '../../mock-replica/engine/engine.ts';
import { addRecorded, engineOnVirtualClock } from './harness.ts';

void test('config resolves profile defaults and overrides, and clamps max_model_len to the pool', () => {
  const { engine } = engineOnVirtualClock({ profile: 'llama-8b-a100' });
  assert.deepEqual(engine.config, {
    profile: 'llama-8b-a100', numGpuBlocks: 27_648, blockSize: 16, maxNumSeqs: 256, maxNumBatchedTokens: 2048,
    maxLoras: 1, maxModelLen: 131_072, timeScale: 1,
  });
  const small = engineOnVirtualClock({ profile: 'llama-8b-a100', numGpuBlocks: 101, maxNumSeqs: 8, maxLoras: 4, timeScale: 0.5 }).engine;
  assert.equal(small.config.maxModelLen, 1600);
  assert.equal(small.config.maxNumSeqs, 8);
  assert.equal(small.config.maxLoras, 4);
  assert.throws(() => new MockEngine({ profile: 'tiny', timeScale: 2 }, new VirtualClock()), /timeScale/);
  assert.throws(() => new MockEngine({ profile: 'tiny', numGpuBlocks: 1 }, new VirtualClock()), /numGpuBlocks/);
});

void test('add rejects caller bugs: duplicate live id, empty prompt or output, longer than max_model_len', () => {
  const { engine, clock } = engineOnVirtualClock({ profile: 'tiny' });
  addRecorded(engine, clock, { id: 'x', promptTokens: 10, outputTokens: 10 });
  assert.throws(() => addRecorded(engine, clock, { id: 'x', promptTokens: 10, outputTokens: 10 }), /already/);
  assert.throws(() => addRecorded(engine, clock, { promptTokens: 0, outputTokens: 10 }), /promptTokens/);
  assert.throws(() => addRecorded(engine, clock, { promptTokens: 10, outputTokens: 0 }), /outputTokens/);
  assert.throws(() => addRecorded(engine, clock, { promptTokens: 2000, outputTokens: 100 }), /maxModelLen/);
  clock.runUntilIdle();
  addRecorded(engine, clock, { id: 'x', promptTokens: 10, outputTokens: 1 }); // a finished id may come back
  clock.runUntilIdle();
});

void test('the engine arms no timer while idle and one per step while busy', () => {
  const { engine, clock } = engineOnVirtualClock({ profile: 'tiny' });
  assert.equal(clock.pendingTimers, 0);
  const r = addRecorded(engine, clock, { promptTokens: 10, outputTokens: 3 });
  assert.equal(clock.pendingTimers, 1);
  clock.runUntilIdle();
  assert.equal(clock.pendingTimers, 0);
  assert.equal(engine.steps, 3);
  assert.equal(r.finishReason, 'stop');
  clock.advance(10_000);
  assert.equal(engine.steps, 3);
});

void test('chunked prefill: no step exceeds max_num_batched_tokens and long prompts co-run with decodes', () => {
  const { engine, clock } = engineOnVirtualClock({ profile: 'tiny' }); // budget 256
  const decoder = addRecorded(engine, clock, { promptTokens: 20, outputTokens: 30 });
  clock.advance(3);
  const long = addRecorded(engine, clock, { promptTokens: 1000, outputTokens: 1 });
  clock.runUntilIdle();
  const it = engine.stats().histograms.iteration_tokens_total;
  assert.equal(it.counts[it.buckets.indexOf(256)], it.count, 'every step carried at most 256 tokens');
  assert.ok(long.firstTokenMs < decoder.finishMs, 'the decoder kept going while the long prompt prefilled');
  assert.equal(decoder.tokenIndexes.length, 30);
});

void test('running never exceeds max_num_seqs; the rest wait FCFS', () => {
  const { engine, clock } = engineOnVirtualClock({ profile: 'tiny', maxNumSeqs: 4 });
  const recs = Array.from({ length: 12 }, () => addRecorded(engine, clock, { promptTokens: 10, outputTokens: 5 }, () => {
    assert.ok(engine.snapshot().running <= 4);
  }));
  clock.advance(0);
  assert.equal(engine.snapshot().running, 4);
  assert.equal(engine.snapshot().waiting, 8);
  clock.runUntilIdle();
  const firstTokenOrder = [...recs].sort((a, b) => a.firstTokenMs - b.firstTokenMs).map((r) => r.id);
  assert.deepEqual(firstTokenOrder, recs.map((r) => r.id));
});

void test('the snapshot keeps the last 1,000 requests, newest last', () => {
  const { engine, clock } = engineOnVirtualClock({ profile: 'tiny' });
  for (let i = 0; i < 1005; i++) addRecorded(engine, clock, { id: `r${i}`, promptTokens: 1, outputTokens: 1 });
  clock.runUntilIdle();
  const reqs = engine.snapshot().requests;
  assert.equal(reqs.length, 1000);
  assert.equal(reqs[0]!.id, 'r5');
  assert.equal(reqs.at(-1)!.id, 'r1004');
  assert.equal(reqs.at(-1)!.state, 'finished');
});

void test('on a RealClock the engine runs in wall time, scaled', async () => {
  const clock = new RealClock();
  const engine = new MockEngine({ profile: 'llama-8b-a100', timeScale: 0.1 }, clock);
  const t0 = performance.now();
  const done = new Promise<number>((resolve) => {
    engine.add({ id: 'rt', promptTokens: 1000, outputTokens: 20, blockHashes: [], finishReason: 'stop', adapter: null }, {
      onFirstToken() {}, onToken() {}, onFinish: () => resolve(performance.now() - t0),
    });
  });
  const elapsedMs = await done;
  // 95 ms prefill + 19 decode steps of 10.6 ms ≈ 297 ms of profile time → ≈ 30 ms at 0.1. Never faster than
  // that; slower only by what a loaded machine adds (the CI box is shared, so the upper bound is loose).
  assert.ok(elapsedMs >= 29 && elapsedMs < 3000, `took ${elapsedMs.toFixed(1)} ms`);
  const e2eMs = engine.stats().histograms.e2e_request_latency_seconds.sum * 1000;
  assert.ok(e2eMs >= 29 && e2eMs <= elapsedMs + 1, `engine saw ${e2eMs.toFixed(1)} ms, the client ${elapsedMs.toFixed(1)} ms`);
  engine.close();
});

void test('VirtualClock fires timers in due order, creation order on ties, and skips cleared ones', () => {
  const clock = new VirtualClock();
  const log: string[] = [];
  clock.setTimer(5, () => log.push('b'));
  clock.setTimer(1, () => {
    log.push('a');
    clock.setTimer(1, () => log.push('a2')); // due at 2, inside this advance
  });
  const c = clock.setTimer(3, () => log.push('c'));
  clock.setTimer(5, () => log.push('b2'));
  clock.clearTimer(c);
  clock.advance(4);
  assert.deepEqual(log, ['a', 'a2']);
  assert.equal(clock.now(), 4);
  clock.runUntilIdle();
  assert.deepEqual(log, ['a', 'a2', 'b', 'b2']);
  assert.equal(clock.now(), 5);
});

void test('several engines share one VirtualClock, as a fleet simulator runs them', () => {
  const clock = new VirtualClock();
  const fast = new MockEngine({ profile: 'llama-8b-a100' }, clock);
  const slow = new MockEngine({ profile: 'llama-70b-tp2-a100' }, clock);
  const a = addRecorded(fast, clock, { promptTokens: 1000, outputTokens: 10 });
  const b = addRecorded(slow, clock, { promptTokens: 1000, outputTokens: 10 });
  clock.runUntilIdle();
  assert.ok(a.finishMs < b.finishMs);
  assert.ok(Math.abs(a.firstTokenMs - 95.4) < 0.5, `8B TTFT ${a.firstTokenMs}`);
  assert.ok(Math.abs(b.firstTokenMs - 469.1) < 0.5, `70B TTFT ${b.firstTokenMs}`);
});
