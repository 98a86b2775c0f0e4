// The design's traffic as generated: means and tails of the lengths, the request rate, shared system
// prompts, multi-turn chats that carry the previous turn, LoRA tenants over the pool's adapters.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SeedMixWorkload } from '../../../native-bench/sim/seed-mix.ts';
import type { PoolShape, SimRequest } from '../../../native-bench/sim/workload-types.ts';

const base: PoolShape = { id: '8b', maxModelLen: 131_072, blockSize: 16, adapters: [] };

function draw(pool: PoolShape, rps: number, seconds: number, seed = 1): SimRequest[] {
  const w = new SeedMixWorkload({ pool, rps, durationMs: seconds * 1000, seed });
  const out: SimRequest[] = [];
  for (let r = w.next(); r; r = w.next()) out.push(r);
  return out;
}

const reqs = draw(base, 100, 300);

test('about the asked rate, in arrival order, numbered densely', () => {
  assert.ok(Math.abs(reqs.length / 300 - 100) < 5, `rate ${reqs.length / 300}`);
  for (let i = 1; i < reqs.length; i++) {
    assert.ok(reqs[i]!.atMs >= reqs[i - 1]!.atMs);
    assert.equal(reqs[i]!.seq, i);
  }
});

test('1,800 prompt and 300 output tokens on average, with tails to 32k and 4k', () => {
  const n = reqs.length;
  const prompt = reqs.reduce((s, r) => s + r.promptTokens, 0) / n;
  const output = reqs.reduce((s, r) => s + r.outputTokens, 0) / n;
  assert.ok(Math.abs(prompt - 1800) / 1800 < 0.1, `mean prompt ${prompt}`);
  assert.ok(Math.abs(output - 300) / 300 < 0.1, `mean output ${output}`);
  const maxPrompt = Math.max(...reqs.map((r) => r.promptTokens));
  const maxOutput = Math.max(...reqs.map((r) => r.outputTokens));
  assert.ok(maxPrompt <= 32_768 && maxPrompt > 16_000, `max prompt ${maxPrompt}`);
  assert.ok(maxOutput <= 4096 && maxOutput > 2000, `max output ${maxOutput}`);
  for (const r of reqs) {
    assert.ok(r.outputTokens >= 1 && r.outputTokens <= r.maxTokens);
    assert.equal(r.blockHashes.length, Math.floor(r.promptTokens / 16));
  }
});

test('requests of a tenant share the system prompt\'s blocks; a chat\'s next turn carries the previous turn and its reply', () => {
  const firstBlocks = new Set(reqs.filter((r) => r.blockHashes.length > 0).map((r) => r.blockHashes[0]));
  assert.ok(firstBlocks.size <= 32, `distinct first blocks ${firstBlocks.size}`);
  // Find follow-up turns: a request whose prompt starts with an earlier request's prompt and reply blocks.
  const byLast = new Map<number, SimRequest>();
  let followUps = 0;
  for (const r of reqs) {
    if (r.replyHashes && r.replyHashes.length > 0) byLast.set(r.replyHashes[r.replyHashes.length - 1]!, r);
  }
  for (const r of reqs) {
    for (let i = r.blockHashes.length - 1; i >= 0; i--) {
      const prev = byLast.get(r.blockHashes[i]!);
      if (!prev || prev.seq >= r.seq) continue;
      assert.ok(r.promptTokens > prev.promptTokens + prev.outputTokens - 16);
      for (let b = 0; b < prev.blockHashes.length; b++) assert.equal(r.blockHashes[b], prev.blockHashes[b]);
      followUps++;
      break;
    }
  }
  assert.ok(followUps > reqs.length * 0.2, `follow-up turns ${followUps} of ${reqs.length}`);
});

test('every turn carries its reply\'s hashes, last turns and single requests too (no look-ahead)', () => {
  for (const r of reqs) {
    assert.ok(r.replyHashes !== null, `request ${r.seq} has no reply hashes`);
    assert.equal(r.replyHashes.length, Math.floor((r.promptTokens + r.outputTokens) / 16) - Math.floor(r.promptTokens / 16));
  }
});

test('a pool with adapters gets LoRA tenants over about all of them, keyed into the hashes', () => {
  const adapters = Array.from({ length: 60 }, (_, i) => `a${i}`);
  const lora = draw({ ...base, id: 'lora', adapters }, 50, 300);
  const used = new Set(lora.map((r) => r.adapter));
  assert.ok(!used.has(null));
  assert.ok(used.size >= 50, `adapters used ${used.size}`);
  const firstByAdapter = new Map<string, number>();
  for (const r of lora) if (r.blockHashes.length > 0) firstByAdapter.set(r.adapter!, r.blockHashes[0]!);
  assert.equal(new Set(firstByAdapter.values()).size, firstByAdapter.size);
});

test('a pool with a short max model length never gets a request longer than it', () => {
  for (const r of draw({ ...base, id: '70b', maxModelLen: 16_384 }, 50, 120)) assert.ok(r.promptTokens + r.maxTokens <= 16_384);
});

test('seeded: the same seed gives the same stream, another seed another', () => {
  const a = draw(base, 20, 60, 7);
  const b = draw(base, 20, 60, 7);
  const c = draw(base, 20, 60, 8);
  assert.deepEqual(a.map((r) => [r.atMs, r.promptTokens, r.outputTokens, r.blockHashes[0]]), b.map((r) => [r.atMs, r.promptTokens, r.outputTokens, r.blockHashes[0]]));
  assert.notDeepEqual(a.map((r) => r.atMs), c.map((r) => r.atMs));
});

test('common random numbers across rates: a slightly higher rate keeps the same sessions, earlier, and adds a few', () => {
  const key = (r: SimRequest): string => `${r.origin!.conversation}|${r.origin!.historyTokens}|${r.promptTokens}|${r.outputTokens}|${r.blockHashes[r.blockHashes.length - 1] ?? ''}`;
  for (const seed of [3, 4]) {
    const lower = draw(base, 100, 120, seed);
    const higher = draw(base, 101, 120, seed);
    const at = new Map(lower.map((r) => [key(r), r.atMs]));
    const shared = higher.filter((r) => at.has(key(r)));
    // A fresh draw at the higher rate would share next to nothing (conversation keys are 32-bit).
    assert.ok(shared.length >= 0.97 * lower.length, `seed ${seed}: ${shared.length} of ${lower.length} kept`);
    assert.ok(higher.length >= lower.length, `seed ${seed}: ${higher.length} < ${lower.length}`);
    // A session's first turn after time 0 arrives no later at the higher rate: the time change only
    // compresses the stream (sessions begun before 0 are placed backwards from it and move towards it).
    const firsts = shared.filter((r) => r.origin!.historyTokens === r.origin!.systemTokens);
    assert.ok(firsts.length > 0.4 * shared.length);
    for (const r of firsts) assert.ok(r.atMs <= at.get(key(r))! + 1e-6, `seed ${seed}: a first turn moved from ${at.get(key(r))} to ${r.atMs} ms`);
  }
});
