import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PROFILES, decodeStepMs, idlePrefillMs, stepDurationMs } from '../../mock-replica/engine/profiles.ts';

// Ranges are the rows of docs/vllm-facts.md "Calibration" (TPOT at ≈1.5k context, idle TTFT).
function inRange(name: string, valueMs: number, [lo, hi]: [number, number]): void {
  assert.ok(valueMs >= lo && valueMs <= hi, `${name}: ${valueMs.toFixed(2)} ms is outside [${lo}, ${hi}]`);
}

void test('llama-8b-a100 decode step matches the reference TPOT table at 1.5k context', () => {
  const p = PROFILES['llama-8b-a100'];
  inRange('batch 1', decodeStepMs(p, 1, 1500), [10, 11]);
  inRange('batch 32', decodeStepMs(p, 32, 1500), [14, 16]);
  inRange('batch 64', decodeStepMs(p, 64, 1500), [18, 22]);
  inRange('batch 128', decodeStepMs(p, 128, 1500), [27, 33]);
  inRange('batch 256', decodeStepMs(p, 256, 1500), [45, 55]);
  // Lambda anchor: ≈11.5 ms per token at batch ≈10 with ≈2k-token contexts.
  inRange('lambda anchor batch 10', decodeStepMs(p, 10, 2000), [10.5, 13]);
});

void test('llama-8b-a100 idle prefill matches the reference TTFT table', () => {
  const p = PROFILES['llama-8b-a100'];
  inRange('1k prompt', idlePrefillMs(p, 1000), [90, 130]);
  inRange('4k prompt', idlePrefillMs(p, 4000), [330, 450]);
  inRange('32k prompt', idlePrefillMs(p, 32_000), [4000, 5500]);
});

void test('a step carrying a 2048-token chunk costs 150-200 ms on llama-8b-a100', () => {
  const p = PROFILES['llama-8b-a100'];
  const ms = stepDurationMs(p, { scheduledSeqs: 1, contextTokens: 0, prefillTokens: 2048, attentionSquares: 2048 ** 2, adaptersLoaded: 0 });
  inRange('2048-token chunk', ms, [150, 200]);
});

void test('llama-70b-tp2-a100 decode step matches the reference TPOT table', () => {
  const p = PROFILES['llama-70b-tp2-a100'];
  inRange('batch 1', decodeStepMs(p, 1, 1500), [47, 52]);
  inRange('batch 8', decodeStepMs(p, 8, 1500), [47, 52]);
  inRange('batch 32', decodeStepMs(p, 32, 1500), [52, 58]);
  inRange('batch 64', decodeStepMs(p, 64, 1500), [58, 65]);
  inRange('batch 128', decodeStepMs(p, 128, 1500), [70, 85]);
  // Lambda anchor: 49-51 ms per token at batch 8-10.
  inRange('lambda anchor batch 10', decodeStepMs(p, 10, 1500), [49, 51]);
});

void test('llama-70b-tp2-a100 idle prefill matches the reference TTFT table', () => {
  const p = PROFILES['llama-70b-tp2-a100'];
  inRange('1k prompt', idlePrefillMs(p, 1000), [450, 600]);
  inRange('4k prompt', idlePrefillMs(p, 4000), [1700, 2200]);
  inRange('32k prompt', idlePrefillMs(p, 32_000), [16_000, 20_000]);
});

void test('profiles carry the reference pool sizes and A100 scheduler defaults', () => {
  assert.equal(PROFILES['llama-8b-a100'].numGpuBlocks, 27_648);
  assert.ok(Math.abs(PROFILES['llama-70b-tp2-a100'].numGpuBlocks - 1500) <= 100);
  for (const p of [PROFILES['llama-8b-a100'], PROFILES['llama-70b-tp2-a100']]) {
    assert.equal(p.blockSize, 16);
    assert.equal(p.maxNumSeqs, 256);
    assert.equal(p.maxNumBatchedTokens, 2048);
  }
  assert.ok(PROFILES.tiny.numGpuBlocks <= 512);
  assert.ok(decodeStepMs(PROFILES.tiny, 1, 100) < 2, 'tiny decodes in under 2 ms');
});

void test('an empty batch takes no time', () => {
  assert.equal(stepDurationMs(PROFILES['llama-8b-a100'], { scheduledSeqs: 0, contextTokens: 0, prefillTokens: 0, attentionSquares: 0, adaptersLoaded: 0 }), 0);
});
