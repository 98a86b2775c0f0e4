import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PROFILES, idlePrefillMs } from '../../mock-replica/engine/profiles.ts';
import type { ProfileName } from '../../mock-replica/engine/types.ts';
import { addRecorded, engineOnVirtualClock, median, ttftMs } from './harness.ts';

// The same reference ranges as profiles.test.ts, measured through the engine (scheduler, chunking, batching)
// on a virtual clock, so what a client of the mock sees is what the step model promises.
function inRange(name: string, valueMs: number, [lo, hi]: [number, number]): void {
  assert.ok(valueMs >= lo && valueMs <= hi, `${name}: ${valueMs.toFixed(2)} ms is outside [${lo}, ${hi}]`);
}

function idleTtftMs(profile: ProfileName, promptTokens: number): number {
  const { engine, clock } = engineOnVirtualClock({ profile });
  const r = addRecorded(engine, clock, { promptTokens, outputTokens: 1 });
  clock.runUntilIdle();
  return ttftMs(r);
}

/** Median inter-token time of the last-admitted of `batch` requests, once all of them are decoding. */
function batchTpotMs(profile: ProfileName, batch: number, promptTokens: number): number {
  const { engine, clock } = engineOnVirtualClock({ profile });
  const outputTokens = Math.ceil((batch * promptTokens) / PROFILES[profile].maxNumBatchedTokens) + 40;
  const recs = Array.from({ length: batch }, () => addRecorded(engine, clock, { promptTokens, outputTokens }));
  clock.runUntilIdle();
  assert.equal(engine.snapshot().preemptions, 0);
  const last = recs[recs.length - 1]!;
  const gaps = last.tokenMs.slice(1, 21).map((t, i) => t - last.tokenMs[i]!);
  return median(gaps);
}

void test('llama-8b-a100 through the engine: idle TTFT for 1k, 4k and 32k prompts', () => {
  inRange('1k', idleTtftMs('llama-8b-a100', 1000), [90, 130]);
  inRange('4k', idleTtftMs('llama-8b-a100', 4000), [330, 450]);
  inRange('32k', idleTtftMs('llama-8b-a100', 32_000), [4000, 5500]);
  assert.ok(Math.abs(idleTtftMs('llama-8b-a100', 4000) - idlePrefillMs(PROFILES['llama-8b-a100'], 4000)) < 1e-6);
});

void test('llama-8b-a100 through the engine: TPOT at batch 1, 32, 128 and 256 with ≈1.5k contexts', () => {
  inRange('batch 1', batchTpotMs('llama-8b-a100', 1, 1500), [10, 11]);
  inRange('batch 32', batchTpotMs('llama-8b-a100', 32, 1450), [14, 16]);
  inRange('batch 128', batchTpotMs('llama-8b-a100', 128, 1400), [27, 33]);
  inRange('batch 256', batchTpotMs('llama-8b-a100', 256, 1400), [45, 55]);
});

void test('llama-70b-tp2-a100 through the engine: idle TTFT and TPOT at batch 1 and 8', () => {
  inRange('1k', idleTtftMs('llama-70b-tp2-a100', 1000), [450, 600]);
  inRange('4k', idleTtftMs('llama-70b-tp2-a100', 4000), [1700, 2200]);
  inRange('batch 1', batchTpotMs('llama-70b-tp2-a100', 1, 1500), [47, 52]);
  inRange('batch 8', batchTpotMs('llama-70b-tp2-a100', 8, 1500), [47, 52]);
});

void test('time scale 0.1 makes every step a tenth as long', () => {
  const { engine, clock } = engineOnVirtualClock({ profile: 'llama-8b-a100', timeScale: 0.1 });
  const r = addRecorded(engine, clock, { promptTokens: 1000, outputTokens: 5 });
  clock.runUntilIdle();
  assert.ok(Math.abs(ttftMs(r) - idleTtftMs('llama-8b-a100', 1000) / 10) < 1e-6);
  assert.ok(Math.abs(engine.stats().histograms.time_to_first_token_seconds.sum - ttftMs(r) / 1000) < 1e-9);
});

void test('a step that carries a long prefill chunk stretches the inter-token gap of every decoding request', () => {
  const { engine, clock } = engineOnVirtualClock({ profile: 'llama-8b-a100' });
  const decoder = addRecorded(engine, clock, { promptTokens: 500, outputTokens: 40 });
  clock.advance(200);
  addRecorded(engine, clock, { promptTokens: 6000, outputTokens: 1 });
  clock.runUntilIdle();
  const gaps = decoder.tokenMs.slice(1).map((t, i) => t - decoder.tokenMs[i]!);
  assert.ok(Math.min(...gaps) < 12, `plain decode steps stay ≈11 ms (min ${Math.min(...gaps)})`);
  assert.ok(Math.max(...gaps) > 150, `steps with a 2048-token chunk take >150 ms (max ${Math.max(...gaps)})`);
});
