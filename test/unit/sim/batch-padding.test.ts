// Decode batches padded to vLLM's CUDA-graph capture sizes (1, 2, 4, then multiples of 8 up to 512;
// docs/vllm-facts.md "CUDA graphs"): a decode-only step costs what its padded batch costs, a step carrying
// prefill or larger than 512 runs unpadded; through the engine, 9 decoding sequences step as slowly as 16.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { VirtualClock } from '../../../test/mock-replica/engine/clocks.ts';
import { MockEngine } from '../../../test/mock-replica/engine/engine.ts';
import { cudaGraphBatch, PROFILES, stepDurationMs, type BatchShape } from '../../../test/mock-replica/engine/profiles.ts';

const p = PROFILES['llama-8b-a100'];
const decode = (seqs: number): BatchShape => ({ scheduledSeqs: seqs, contextTokens: seqs * 1000, prefillTokens: 0, attentionSquares: 0, adaptersLoaded: 0 });

test('capture sizes: 1, 2, 4, then multiples of 8 up to 512', () => {
  assert.deepEqual([1, 2, 3, 4, 5, 8, 9, 16, 17, 255, 256, 257, 505, 512, 513, 600].map(cudaGraphBatch), [1, 2, 4, 4, 8, 8, 16, 16, 24, 256, 256, 264, 512, 512, 513, 600]);
});

test('a padded decode step costs its capture size\'s sequences; prefill steps are not padded', () => {
  const padded9 = stepDurationMs(p, decode(9), true);
  assert.ok(Math.abs(padded9 - (stepDurationMs(p, decode(9)) + 7 * p.perSeqMs)) < 1e-9);
  assert.ok(padded9 > stepDurationMs(p, decode(9)));
  assert.equal(stepDurationMs(p, decode(16), true), stepDurationMs(p, decode(16)));
  const mixed: BatchShape = { ...decode(9), prefillTokens: 500 };
  assert.equal(stepDurationMs(p, mixed, true), stepDurationMs(p, mixed));
  assert.equal(stepDurationMs(p, decode(600), true), stepDurationMs(p, decode(600)));
});

/** Mean decode step (TPOT) of `n` equal requests on one engine, with or without padding. */
function tpot(n: number, padding: boolean): number {
  const clock = new VirtualClock(0);
  const engine = new MockEngine({ profile: 'llama-8b-a100', cudaGraphPadding: padding }, clock);
  const first: number[] = [];
  const last: number[] = [];
  for (let i = 0; i < n; i++) {
    engine.add({ id: `r${i}`, promptTokens: 32, blockHashes: new Float64Array(0), outputTokens: 50, finishReason: 'length', adapter: null }, {
      onFirstToken: () => { first[i] = clock.now(); },
      onToken: () => { last[i] = clock.now(); },
      onFinish: () => {},
    });
  }
  clock.runUntilIdle();
  return (last[0]! - first[0]!) / 49;
}

test('through the engine: 9 decoding sequences step as slowly as 16 would, 8 as 8', () => {
  const t9 = tpot(9, true);
  assert.ok(Math.abs(t9 - stepDurationMs(p, { ...decode(16), contextTokens: 0 }, false)) < 0.1, `${t9}`);
  assert.ok(t9 > tpot(9, false));
  assert.ok(Math.abs(tpot(8, true) - tpot(8, false)) < 1e-9);
});
