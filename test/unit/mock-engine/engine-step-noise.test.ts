// stepTimeNoise: an engine that is not its profile. Each engine's step-time parameters are drawn within ±error
// of the profile's (fixed by its seed), and each step is scaled by a fresh draw within ±jitter.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { VirtualClock } from '../../mock-replica/engine/clocks.ts';
import { MockEngine } from '../../mock-replica/engine/engine.ts';
import { PROFILES, perturbedProfile } from '../../mock-replica/engine/profiles.ts';
import type { EngineOptions } from '../../mock-replica/engine/types.ts';
import { SeededRandom } from '../../../src/router/seeded-random.ts';
import { addRecorded } from './harness.ts';

/** TTFT and the 10 inter-token gaps of one 1,000-token prompt on an idle engine. */
function timings(opts: EngineOptions): { ttft: number; gaps: number[] } {
  const clock = new VirtualClock();
  const engine = new MockEngine(opts, clock);
  const r = addRecorded(engine, clock, { promptTokens: 1000, outputTokens: 11 });
  clock.runUntilIdle();
  const gaps = r.tokenMs.slice(1).map((t, i) => t - r.tokenMs[i]!);
  return { ttft: r.firstTokenMs, gaps };
}

void test('perturbedProfile keeps every step-time parameter within ±error and the capacity figures as they are', () => {
  const p = PROFILES['llama-8b-a100'];
  const keys = ['fixedMs', 'weightReadMs', 'kvReadMsPer1kTokens', 'perSeqMs', 'prefillTokensPerSecond', 'attentionCoef', 'adapterLoadMs'] as const;
  let moved = 0;
  for (let seed = 1; seed <= 50; seed++) {
    const q = perturbedProfile(p, 20, new SeededRandom(seed));
    for (const k of keys) {
      assert.ok(q[k] >= p[k] * 0.8 - 1e-12 && q[k] <= p[k] * 1.2 + 1e-12, `${k} ${q[k]} against ${p[k]}`);
      if (Math.abs(q[k] / p[k] - 1) > 0.1) moved++;
    }
    assert.equal(q.numGpuBlocks, p.numGpuBlocks);
    assert.equal(q.maxNumBatchedTokens, p.maxNumBatchedTokens);
  }
  // Uniform on ±20 %: about half the draws are more than 10 % off.
  assert.ok(moved > 100 && moved < 250, `${moved} of 350 draws more than 10 % off`);
});

void test('an engine with step-time error runs at its own speed, the same one for the same seed', () => {
  const base: EngineOptions = { profile: 'llama-8b-a100' };
  const nominal = timings(base);
  const a = timings({ ...base, stepTimeNoise: { errorPct: 20, jitterPct: 0, seed: 7 } });
  const again = timings({ ...base, stepTimeNoise: { errorPct: 20, jitterPct: 0, seed: 7 } });
  const b = timings({ ...base, stepTimeNoise: { errorPct: 20, jitterPct: 0, seed: 8 } });
  assert.deepEqual(again, a);
  assert.notEqual(a.ttft, nominal.ttft);
  assert.notEqual(a.ttft, b.ttft);
  assert.ok(a.ttft > nominal.ttft * 0.8 && a.ttft < nominal.ttft * 1.2, `${a.ttft} against ${nominal.ttft}`);
  // Without jitter consecutive decode steps differ only by one more token of context to read (< 1 µs).
  for (const g of a.gaps) assert.ok(Math.abs(g - a.gaps[0]!) < 1e-3);
});

void test('step jitter varies each step within ±jitter of the engine\'s figure', () => {
  const base: EngineOptions = { profile: 'llama-8b-a100' };
  const steady = timings(base).gaps[0]!;
  const j = timings({ ...base, stepTimeNoise: { errorPct: 0, jitterPct: 10, seed: 3 } });
  assert.equal(new Set(j.gaps.map((g) => g.toFixed(6))).size, j.gaps.length);
  for (const g of j.gaps) assert.ok(g >= steady * 0.9 - 1e-2 && g <= steady * 1.1 + 1e-2, `${g} against ${steady}`);
  assert.throws(() => new MockEngine({ ...base, stepTimeNoise: { errorPct: 100, jitterPct: 0, seed: 1 } }, new VirtualClock()), /stepTimeNoise/);
});
