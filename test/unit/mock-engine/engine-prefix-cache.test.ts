import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EngineRequest } from '../../mock-replica/engine/engine-request.ts';
import { PROFILES } from '../../mock-replica/engine/profiles.ts';
import { addRecorded, blockHashes, engineOnVirtualClock, ttftMs } from './harness.ts';

const SYSTEM_TOKENS = 1500;

void test('a second request sharing a 1,500-token system prompt reports cached_tokens in whole blocks and a TTFT lower by their prefill cost', () => {
  const profile = PROFILES['llama-8b-a100'];
  const { engine, clock } = engineOnVirtualClock({ profile: 'llama-8b-a100' });
  const prompt = 1620;
  const first = addRecorded(engine, clock, {
    promptTokens: prompt, outputTokens: 20,
    blockHashes: blockHashes(prompt, { prefixSeed: 7, sharedTokens: SYSTEM_TOKENS, uniqueSeed: 1 }),
  });
  clock.runUntilIdle();
  const second = addRecorded(engine, clock, {
    promptTokens: prompt, outputTokens: 20,
    blockHashes: blockHashes(prompt, { prefixSeed: 7, sharedTokens: SYSTEM_TOKENS, uniqueSeed: 2 }),
  });
  clock.runUntilIdle();

  assert.equal(first.cachedTokens, 0);
  assert.equal(second.cachedTokens % 16, 0);
  assert.equal(second.cachedTokens, Math.floor(SYSTEM_TOKENS / 16) * 16); // 93 full blocks = 1488 tokens
  const dropMs = ttftMs(first) - ttftMs(second);
  const prefillCostMs = (second.cachedTokens / profile.prefillTokensPerSecond) * 1000; // ≈124 ms
  assert.ok(dropMs > prefillCostMs * 0.95 && dropMs < prefillCostMs * 1.1,
    `TTFT dropped by ${dropMs.toFixed(1)} ms, the prefill cost of ${second.cachedTokens} tokens is ${prefillCostMs.toFixed(1)} ms`);

  const s = engine.stats();
  assert.equal(s.prefix_cache_queries_total, 2 * prompt);
  assert.equal(s.prefix_cache_hits_total, second.cachedTokens);
  const req = engine.snapshot().requests.find((r) => r.id === second.id);
  assert.equal(req?.cached_tokens, second.cachedTokens);
});

void test('a fully cached prompt still recomputes its last token: cached_tokens = floor((len − 1) / 16) · 16', () => {
  const { engine, clock } = engineOnVirtualClock({ profile: 'tiny' });
  for (const prompt of [160, 161, 175]) {
    const hashes = blockHashes(prompt, { prefixSeed: prompt, sharedTokens: prompt, uniqueSeed: prompt });
    addRecorded(engine, clock, { promptTokens: prompt, outputTokens: 2, blockHashes: hashes });
    clock.runUntilIdle();
    const again = addRecorded(engine, clock, { promptTokens: prompt, outputTokens: 2, blockHashes: hashes });
    clock.runUntilIdle();
    assert.equal(again.cachedTokens, Math.floor((prompt - 1) / 16) * 16, `prompt ${prompt}`);
  }
});

void test('a request shares cached blocks while the first one still holds them, and the blocks are counted once', () => {
  const { engine, clock } = engineOnVirtualClock({ profile: 'tiny' });
  const hashes = (seed: number) => blockHashes(480, { prefixSeed: 3, sharedTokens: 320, uniqueSeed: seed });
  const a = addRecorded(engine, clock, { promptTokens: 480, outputTokens: 200, blockHashes: hashes(1) });
  clock.runUntil(() => a.tokenIndexes.length > 0);
  const freeWithA = engine.snapshot().free_blocks;
  const b = addRecorded(engine, clock, { promptTokens: 480, outputTokens: 200, blockHashes: hashes(2) });
  clock.runUntil(() => b.tokenIndexes.length > 0);
  assert.equal(b.cachedTokens, 320);
  // b needed only its 10 unshared blocks (480/16 = 30, 20 shared), plus the decode block(s) both added since.
  const usedByB = freeWithA - engine.snapshot().free_blocks;
  assert.ok(usedByB >= 10 && usedByB <= 12, `b took ${usedByB} blocks`);
  clock.runUntilIdle();
  assert.equal(engine.snapshot().free_blocks, PROFILES.tiny.numGpuBlocks - 1);
});

void test('unreferenced cached blocks are evicted LRU, a request\'s tail blocks first', () => {
  const { engine, clock } = engineOnVirtualClock({ profile: 'tiny' }); // 255 usable blocks
  const old = blockHashes(320, { prefixSeed: 11, sharedTokens: 320, uniqueSeed: 11 });
  const recent = blockHashes(320, { prefixSeed: 12, sharedTokens: 320, uniqueSeed: 12 });
  addRecorded(engine, clock, { promptTokens: 320, outputTokens: 1, blockHashes: old });
  clock.runUntilIdle();
  addRecorded(engine, clock, { promptTokens: 320, outputTokens: 1, blockHashes: recent });
  clock.runUntilIdle();
  assert.equal(engine.snapshot().cached_blocks, 40);
  // Two 1,840-token prompts need 230 blocks; 215 were never used, so 15 cached ones are evicted: the least
  // recently used prefix's, last block first (freed blocks go to the tail in reverse).
  addRecorded(engine, clock, { promptTokens: 1840, outputTokens: 1 });
  addRecorded(engine, clock, { promptTokens: 1840, outputTokens: 1 });
  clock.runUntilIdle();
  assert.equal(engine.snapshot().preemptions, 0);
  const again = addRecorded(engine, clock, { promptTokens: 320, outputTokens: 1, blockHashes: recent });
  clock.runUntilIdle();
  assert.equal(again.cachedTokens, 304, 'the recently used prefix survived whole');
  // `again` took one fresh block from the LRU head: the old prefix's block 4. Blocks 0-3 are left.
  const oldAgain = addRecorded(engine, clock, { promptTokens: 320, outputTokens: 1, blockHashes: old });
  clock.runUntilIdle();
  assert.equal(oldAgain.cachedTokens, 64, 'the old prefix kept only its first blocks');
});

void test('blocks filled by generated tokens are cached too, under hashes chained from the prompt and unique to the request', () => {
  const { engine, clock } = engineOnVirtualClock({ profile: 'tiny' });
  const hashes = blockHashes(100, { prefixSeed: 5, sharedTokens: 100, uniqueSeed: 5 }); // 6 full prompt blocks
  addRecorded(engine, clock, { promptTokens: 100, outputTokens: 61, blockHashes: hashes });
  clock.runUntilIdle();
  // 100 + 61 tokens, the last one sampled but never computed: 160 computed tokens = 10 full blocks.
  assert.equal(engine.snapshot().cached_blocks, 10);
  addRecorded(engine, clock, { promptTokens: 100, outputTokens: 61, blockHashes: hashes });
  clock.runUntilIdle();
  // The same prompt hits its 6 prompt blocks; its generated blocks get their own hashes (4 more cached).
  assert.equal(engine.snapshot().cached_blocks, 14);
  assert.equal(engine.stats().prefix_cache_hits_total, 96);
});

void test('EngineRequest hashes prompt blocks from the spec and later blocks from a per-request chain', () => {
  const noEvents = { onFirstToken() {}, onToken() {}, onFinish() {} };
  const spec = { id: 'a', promptTokens: 40, blockHashes: [11, 22, 33], outputTokens: 50, finishReason: 'stop' as const, adapter: null };
  const a = new EngineRequest(spec, noEvents, 16, 1, 0);
  const b = new EngineRequest({ ...spec, id: 'b' }, noEvents, 16, 2, 0);
  assert.deepEqual([a.blockHash(0), a.blockHash(1)], [11, 22], 'the two full prompt blocks come from the spec');
  assert.notEqual(a.blockHash(2), 33, 'block 2 holds generated tokens: the spec hash of a partial block is not used');
  assert.equal(a.blockHash(5), a.blockHash(5));
  assert.notEqual(a.blockHash(2), b.blockHash(2));
  assert.ok(Number.isSafeInteger(a.blockHash(4)) && a.blockHash(4) >= 0);
});
