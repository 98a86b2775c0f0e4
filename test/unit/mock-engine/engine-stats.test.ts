import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { HistogramSnapshot } from '../../mock-replica/engine/types.ts';
import { build125Buckets, TTFT_BUCKETS_SECONDS } from '../../mock-replica/engine/stats.ts';
import { addRecorded, blockHashes, engineOnVirtualClock, type Recorded } from './harness.ts';

/** Deterministic PRNG (mulberry32) so the workload is the same on every run. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function assertWellFormed(name: string, h: HistogramSnapshot): void {
  assert.equal(h.counts.length, h.buckets.length, name);
  for (let i = 1; i < h.counts.length; i++) assert.ok(h.counts[i]! >= h.counts[i - 1]!, `${name} counts are cumulative`);
  assert.ok((h.counts.at(-1) ?? 0) <= h.count, `${name} +Inf bucket holds everything`);
  assert.ok(h.sum >= 0, name);
}

void test('stats agree with snapshot throughout a mixed workload with preemptions, aborts, adapters and shared prefixes', () => {
  const { engine, clock } = engineOnVirtualClock({ profile: 'tiny', numGpuBlocks: 120, maxLoras: 2, loras: ['l1', 'l2', 'l3'] });
  const random = rng(42);
  const recs: Recorded[] = [];
  let checks = 0;
  let sawPreemption = false;
  const check = (): void => {
    const snap = engine.snapshot();
    const s = engine.stats();
    assert.equal(s.running, snap.running);
    assert.equal(s.waiting, snap.waiting);
    assert.ok(s.running <= engine.config.maxNumSeqs);
    assert.ok(Math.abs(s.kv_cache_usage_perc - (1 - snap.free_blocks / (snap.total_blocks - 1))) < 1e-12);
    assert.equal(s.num_preemptions_total, snap.preemptions);
    assert.equal(s.request_success_total.abort, snap.aborted);
    assert.equal(s.request_success_total.stop + s.request_success_total.length, snap.completed);
    assert.ok(new Set(s.lora.running_lora_adapters).size <= 2);
    const h = s.histograms;
    assert.equal(h.e2e_request_latency_seconds.count, snap.aborted + snap.completed);
    assert.equal(h.inter_token_latency_seconds.count, s.generation_tokens_total - h.time_to_first_token_seconds.count);
    assert.equal(h.iteration_tokens_total.count, engine.steps);
    if (snap.preemptions > 0) sawPreemption = true;
    assert.deepEqual(engine.audit(), []);
    checks++;
  };

  for (let i = 0; i < 120; i++) {
    clock.advance(random() * 8);
    const promptTokens = 16 + Math.floor(random() * 400);
    const shared = random() < 0.5 ? Math.min(promptTokens, 256) : 0;
    const adapter = random() < 0.3 ? (['l1', 'l2', 'l3'] as const)[Math.floor(random() * 3)]! : null;
    recs.push(addRecorded(engine, clock, {
      promptTokens,
      outputTokens: 1 + Math.floor(random() * 200),
      finishReason: random() < 0.3 ? 'length' : 'stop',
      adapter,
      blockHashes: blockHashes(promptTokens, { prefixSeed: adapter === null ? 1 : 2, sharedTokens: shared, uniqueSeed: 1000 + i }),
    }, check));
    if (random() < 0.1 && recs.length > 3) engine.abort(recs[Math.floor(random() * recs.length)]!.id);
    check();
  }
  clock.runUntilIdle();
  check();
  assert.ok(sawPreemption, 'the workload was heavy enough to preempt');
  assert.ok(checks > 1000);

  const s = engine.stats();
  const snap = engine.snapshot();
  const finished = recs.filter((r) => r.finishReason !== 'abort');
  const gotFirst = recs.filter((r) => r.firstTokenCalls === 1);
  assert.equal(snap.completed, finished.length);
  assert.equal(s.generation_tokens_total, recs.reduce((n, r) => n + r.tokenIndexes.length, 0));
  assert.equal(s.prompt_tokens_total, gotFirst.reduce((n, r) => n + engine.snapshot().requests.find((x) => x.id === r.id)!.prompt_tokens, 0));
  assert.equal(s.histograms.time_to_first_token_seconds.count, gotFirst.length);
  assert.equal(s.histograms.request_generation_tokens.sum, s.generation_tokens_total);
  assert.equal(s.histograms.request_prompt_tokens.count, recs.length);
  assert.equal(s.histograms.request_queue_time_seconds.count, gotFirst.length);
  assert.equal(s.prefix_cache_hits_total % 16, 0);
  assert.ok(s.prefix_cache_hits_total > 0 && s.prefix_cache_hits_total < s.prefix_cache_queries_total);
  assert.equal(snap.free_blocks, 119);
  assert.deepEqual(s.lora.running_lora_adapters, []);
  assert.deepEqual(s.lora.waiting_lora_adapters, []);
  for (const [name, h] of Object.entries(s.histograms)) assertWellFormed(name, h);

  // TTFT as the histogram saw it is what the clients saw.
  const ttftSumSeconds = gotFirst.reduce((n, r) => n + (r.firstTokenMs - r.addedMs) / 1000, 0);
  assert.ok(Math.abs(s.histograms.time_to_first_token_seconds.sum - ttftSumSeconds) < 1e-9);
});

void test('histograms use the vLLM bucket bounds and cumulative counts', () => {
  const { engine, clock } = engineOnVirtualClock({ profile: 'llama-8b-a100' });
  addRecorded(engine, clock, { promptTokens: 1000, outputTokens: 3 });
  clock.runUntilIdle();
  const h = engine.stats().histograms;
  assert.deepEqual(h.time_to_first_token_seconds.buckets, [...TTFT_BUCKETS_SECONDS]);
  // ≈93 ms TTFT: below 0.1, above 0.08.
  assert.equal(h.time_to_first_token_seconds.counts[TTFT_BUCKETS_SECONDS.indexOf(0.08)], 0);
  assert.equal(h.time_to_first_token_seconds.counts[TTFT_BUCKETS_SECONDS.indexOf(0.1)], 1);
  assert.equal(h.time_to_first_token_seconds.counts.at(-1), 1);
  assert.deepEqual(h.request_prompt_tokens.buckets, build125Buckets(131_072));
  assert.deepEqual(build125Buckets(131_072).slice(0, 7), [1, 2, 5, 10, 20, 50, 100]);
  assert.equal(build125Buckets(131_072).at(-1), 100_000);
  assert.equal(h.request_prompt_tokens.counts[h.request_prompt_tokens.buckets.indexOf(500)], 0);
  assert.equal(h.request_prompt_tokens.counts[h.request_prompt_tokens.buckets.indexOf(1000)], 1);
  assert.equal(h.inter_token_latency_seconds.count, 2);
  assert.equal(h.request_time_per_output_token_seconds.count, 1);
  assert.deepEqual(h.iteration_tokens_total.buckets.slice(0, 3), [1, 8, 16]);
});

void test('prompt tokens are counted when the first token is sampled, not on arrival', () => {
  const { engine, clock } = engineOnVirtualClock({ profile: 'llama-8b-a100' });
  const r = addRecorded(engine, clock, { promptTokens: 5000, outputTokens: 2 }); // three prefill steps
  clock.advance(200);
  assert.equal(engine.stats().prompt_tokens_total, 0);
  assert.equal(engine.stats().running, 1);
  clock.runUntil(() => r.firstTokenCalls === 1);
  assert.equal(engine.stats().prompt_tokens_total, 5000);
});
