import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PROFILES } from '../../mock-replica/engine/profiles.ts';
import { addRecorded, engineOnVirtualClock, type Recorded } from './harness.ts';

void test('filling the KV pool preempts the newest sequences by recompute and every sequence still finishes', () => {
  const { engine, clock } = engineOnVirtualClock({ profile: 'tiny' }); // 255 usable blocks, 16 seqs
  const maxNumSeqs = engine.config.maxNumSeqs;
  let maxRunning = 0;
  let sawPreempted = false;
  let maxUsage = 0;
  const check = (): void => {
    const snap = engine.snapshot();
    maxRunning = Math.max(maxRunning, snap.running);
    maxUsage = Math.max(maxUsage, engine.stats().kv_cache_usage_perc);
    if (snap.requests.some((r) => r.state === 'preempted')) sawPreempted = true;
    assert.deepEqual(engine.audit(), []);
  };
  // 40 requests that each end at 500 tokens = 32 blocks: 16 running would need 512 blocks.
  const recs: Recorded[] = [];
  for (let i = 0; i < 40; i++) {
    recs.push(addRecorded(engine, clock, { promptTokens: 200, outputTokens: 300, finishReason: i % 2 ? 'length' : 'stop' }, check));
  }
  clock.runUntilIdle();

  const snap = engine.snapshot();
  assert.ok(snap.preemptions > 0, 'the pool ran out and preempted');
  assert.ok(sawPreempted, 'a preempted request showed up as such in the snapshot');
  assert.ok(maxRunning <= maxNumSeqs, `running peaked at ${maxRunning}`);
  assert.ok(maxUsage <= 1);
  for (const [i, r] of recs.entries()) {
    assert.equal(r.firstTokenCalls, 1, `${r.id} got exactly one first token`);
    assert.deepEqual(r.tokenIndexes, Array.from({ length: 300 }, (_, k) => k), `${r.id} got tokens 0..299 once, in order`);
    assert.equal(r.finishCalls, 1);
    assert.equal(r.finishReason, i % 2 ? 'length' : 'stop');
  }
  assert.equal(snap.running, 0);
  assert.equal(snap.waiting, 0);
  assert.equal(snap.free_blocks, PROFILES.tiny.numGpuBlocks - 1, 'every block came back');
  assert.equal(snap.completed, 40);
  const stats = engine.stats();
  assert.equal(stats.num_preemptions_total, snap.preemptions);
  assert.equal(stats.generation_tokens_total, 40 * 300);
  assert.equal(stats.prompt_tokens_total, 40 * 200, 'a recomputed prompt is not counted twice');
});

void test('the newest running request is the one preempted, and it goes back to the head of the queue', () => {
  // 20 usable blocks, 4 seqs: two requests that each grow to 192 tokens (12 blocks) cannot both fit.
  const { engine, clock } = engineOnVirtualClock({ profile: 'tiny', numGpuBlocks: 21, maxNumSeqs: 4 });
  const older = addRecorded(engine, clock, { promptTokens: 64, outputTokens: 128 });
  const newer = addRecorded(engine, clock, { promptTokens: 64, outputTokens: 128 });
  let newerStateAtFirstPreemption: string | undefined;
  let olderStateAtFirstPreemption: string | undefined;
  clock.runUntil(() => {
    if (engine.snapshot().preemptions === 0) return false;
    const reqs = engine.snapshot().requests;
    newerStateAtFirstPreemption = reqs.find((r) => r.id === newer.id)?.state;
    olderStateAtFirstPreemption = reqs.find((r) => r.id === older.id)?.state;
    return true;
  });
  assert.equal(newerStateAtFirstPreemption, 'preempted');
  assert.equal(olderStateAtFirstPreemption, 'running');
  // A request arriving now queues behind the preempted one: it is not served before `newer` is re-admitted.
  const later = addRecorded(engine, clock, { promptTokens: 16, outputTokens: 1 });
  clock.runUntil(() => engine.snapshot().requests.find((r) => r.id === newer.id)?.state === 'running');
  assert.equal(later.firstTokenCalls, 0, 'the late request did not overtake the preempted one');
  clock.runUntilIdle();
  assert.ok(newer.finishMs > older.finishMs, 'the preempted request finished after the one it yielded to');
  assert.equal(newer.tokenIndexes.length, 128);
  assert.equal(later.finishCalls, 1);
});
