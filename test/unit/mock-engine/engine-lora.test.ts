import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PROFILES } from '../../mock-replica/engine/profiles.ts';
import { addRecorded, engineOnVirtualClock, ttftMs, type Recorded } from './harness.ts';

const ADAPTERS = ['a1', 'a2', 'a3', 'a4', 'a5', 'a6', 'a7'];

void test('with max_loras 2 a seventh adapter waits while two others run, and runs once one drains', () => {
  const { engine, clock } = engineOnVirtualClock({ profile: 'tiny', maxLoras: 2, loras: ADAPTERS });
  let maxDistinctRunning = 0;
  const check = (): void => {
    const lora = engine.stats().lora;
    maxDistinctRunning = Math.max(maxDistinctRunning, lora.running_lora_adapters.length);
  };
  const recs: Recorded[] = [];
  // Six requests for a1 and a2 (three each), then one for a7; plenty of seats and blocks for all seven.
  for (const adapter of ['a1', 'a2', 'a1', 'a2', 'a1', 'a2']) recs.push(addRecorded(engine, clock, { promptTokens: 32, outputTokens: 40, adapter }, check));
  const seventh = addRecorded(engine, clock, { promptTokens: 32, outputTokens: 10, adapter: 'a7' }, check);
  const base = addRecorded(engine, clock, { promptTokens: 32, outputTokens: 10, adapter: null }, check);
  clock.advance(20); // the first step loads a1 and a2 (2 x 5 ms) and prefills everything admitted

  const stats = engine.stats();
  assert.deepEqual([...stats.lora.running_lora_adapters].sort(), ['a1', 'a2']);
  assert.deepEqual(stats.lora.waiting_lora_adapters, ['a7']);
  assert.equal(stats.lora.max_lora, 2);
  assert.equal(engine.snapshot().waiting, 1, 'only the a7 request waits');
  assert.equal(seventh.firstTokenCalls, 0);
  assert.ok(base.firstTokenCalls === 1, 'a base-model request behind it is not blocked (head-of-line per adapter)');

  clock.runUntilIdle();
  assert.equal(seventh.tokenIndexes.length, 10, 'a7 ran after an adapter drained');
  const firstDrain = Math.min(...recs.map((r) => r.finishMs));
  assert.ok(seventh.firstTokenMs > firstDrain, 'and not before');
  assert.ok(maxDistinctRunning <= 2, `distinct running adapters peaked at ${maxDistinctRunning}`);
});

void test('seven adapters with max_loras 2: never more than two distinct adapters in the running batch', () => {
  const { engine, clock } = engineOnVirtualClock({ profile: 'tiny', maxLoras: 2, loras: ADAPTERS });
  let peak = 0;
  const recs: Recorded[] = [];
  for (let i = 0; i < 28; i++) {
    recs.push(addRecorded(engine, clock, { promptTokens: 40, outputTokens: 5 + (i % 7) * 3, adapter: ADAPTERS[i % 7]! }, () => {
      peak = Math.max(peak, engine.stats().lora.running_lora_adapters.length);
    }));
  }
  clock.runUntilIdle();
  assert.equal(peak, 2);
  for (const r of recs) assert.equal(r.finishReason, 'stop');
});

void test('moving an adapter into a GPU slot costs adapterLoadMs once; a resident adapter costs nothing', () => {
  const { engine, clock } = engineOnVirtualClock({ profile: 'tiny', maxLoras: 1, loras: ['x', 'y'] });
  const cold = addRecorded(engine, clock, { promptTokens: 32, outputTokens: 1, adapter: 'x' });
  clock.runUntilIdle();
  const warm = addRecorded(engine, clock, { promptTokens: 32, outputTokens: 1, adapter: 'x' });
  clock.runUntilIdle();
  const swapped = addRecorded(engine, clock, { promptTokens: 32, outputTokens: 1, adapter: 'y' });
  clock.runUntilIdle();
  const loadMs = PROFILES.tiny.adapterLoadMs;
  assert.ok(Math.abs(ttftMs(cold) - ttftMs(warm) - loadMs) < 1e-9, `cold ${ttftMs(cold)} warm ${ttftMs(warm)}`);
  assert.ok(Math.abs(ttftMs(swapped) - ttftMs(cold)) < 1e-9, 'y evicted x from the only slot and paid the load');
});

void test('load and unload adapters: ok, exists, missing; the snapshot lists what is loaded', () => {
  const { engine } = engineOnVirtualClock({ profile: 'tiny', loras: ['sql'] });
  assert.deepEqual(engine.snapshot().loaded_adapters, ['sql']);
  assert.equal(engine.loadAdapter('chat'), 'ok');
  assert.equal(engine.loadAdapter('chat'), 'exists');
  assert.deepEqual(engine.snapshot().loaded_adapters, ['sql', 'chat']);
  assert.equal(engine.unloadAdapter('sql'), 'ok');
  assert.equal(engine.unloadAdapter('sql'), 'missing');
  assert.deepEqual(engine.snapshot().loaded_adapters, ['chat']);
});
