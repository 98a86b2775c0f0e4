// The admission controller's small pieces, table-driven: the queue allowance per tier and max_tokens, the
// deadline-ordered queue, the drain-rate learner (busy time only, exponential window).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { queueAllowanceMs } from '../../../src/admission/deadline.ts';
import { DeadlineQueue, type QueuedEntry } from '../../../src/admission/deadline-queue.ts';
import { DrainRate, MIN_BUSY_MS } from '../../../src/admission/drain-rate.ts';
import { configSchema } from '../../../src/config/schema.ts';

const admissionCfg = (over: Record<string, unknown> = {}) => configSchema.parse({
  pools: [{ id: 'p', model: 'm', replicas: [{ id: 'x', url: 'http://127.0.0.1:1' }] }], admission: over,
}).admission;

test('queue allowance: the tier\'s, less what max_tokens at the TPOT target eats of its end-to-end allowance, capped by max_queue_ms', () => {
  const cases: Array<[string, Record<string, unknown>, 'premium' | 'standard' | 'batch', number, number]> = [
    ['premium default', {}, 'premium', 1024, 1000],
    ['standard default', {}, 'standard', 1024, 2000],
    ['batch default', {}, 'batch', 1024, 10000],
    // 120,000 − 2,370 × 50 = 1,500 left of the end-to-end allowance: less than the tier's 2,000
    ['standard, long generation', {}, 'standard', 2370, 1500],
    ['standard, generation alone exceeds the allowance', {}, 'standard', 2400, 0],
    ['batch capped by max_queue_ms', { max_queue_ms: 3000 }, 'batch', 10, 3000],
    ['tier set to 0: admit now or shed', { queue_ms_by_tier: { premium: 0 } }, 'premium', 10, 0],
    ['faster TPOT target leaves more', { tpot_target_ms: 10 }, 'standard', 2400, 2000],
  ];
  for (const [name, cfg, tier, out, want] of cases) assert.equal(queueAllowanceMs(admissionCfg(cfg), tier, out), want, name);
});

interface E extends QueuedEntry { name: string }
const entry = (name: string, deadlineMs: number, seq: number, needTokens: number): E => ({ name, deadlineMs, seq, needTokens });

test('deadline queue: earliest deadline first, arrival order among equals; tokens ahead of a deadline; remove keeps the sum', () => {
  const q = new DeadlineQueue<E>();
  const a = entry('a', 2000, 1, 100);
  const b = entry('b', 1000, 2, 50);
  const c = entry('c', 2000, 3, 10);
  const d = entry('d', 1500, 4, 5);
  assert.equal(q.insert(a), 0);
  assert.equal(q.insert(b), 0);
  assert.equal(q.insert(c), 2);
  assert.equal(q.insert(d), 1);
  assert.deepEqual(q.snapshot([]).map((e) => e.name), ['b', 'd', 'a', 'c']);
  assert.equal(q.queuedTokens, 165);
  assert.equal(q.tokensAhead(999), 0);
  assert.equal(q.tokensAhead(1500), 55);
  assert.equal(q.tokensAhead(2000), 165);
  q.setNeed(a, 40);
  assert.equal(q.queuedTokens, 105);
  assert.equal(q.remove(d), true);
  assert.equal(q.remove(d), false);
  assert.equal(q.queuedTokens, 100);
  assert.deepEqual(q.snapshot([]).map((e) => e.name), ['b', 'a', 'c']);
});

test('drain rate: tokens per busy second over an exponential window; idle time is not counted; NaN until enough is seen', () => {
  const r = new DrainRate(5000);
  r.setBusy(0, true);
  assert.ok(Number.isNaN(r.tokensPerSecond(0)));
  r.observe(MIN_BUSY_MS / 2, 1000);
  assert.ok(Number.isNaN(r.tokensPerSecond(MIN_BUSY_MS / 2)), 'one completion right after start says too little');
  r.observe(500, 1000);
  r.observe(1000, 1000);
  // Both sums decay with the same kernel: observations at 100, 500 and 1,000 ms of busy time.
  const k = (dt: number): number => Math.exp(-dt / 5000);
  const tokensAt1000 = (1000 * k(400) + 1000) * k(500) + 1000;
  const busy = 5000 * (1 - k(1000));
  assert.ok(Math.abs(r.tokensPerSecond(1000) - (tokensAt1000 / busy) * 1000) < 1e-6);
  // ≈ 3,000 tokens over one busy second
  assert.ok(Math.abs(r.tokensPerSecond(1000) - 3000) < 200);
  const before = r.tokensPerSecond(1000);
  r.setBusy(1000, false);
  assert.equal(r.tokensPerSecond(61_000), before, 'a minute idle changes nothing');
  r.setBusy(61_000, true);
  // Busy again with nothing released: the rate fades, as the pool frees nothing.
  assert.ok(r.tokensPerSecond(66_000) < before * 0.6);
});
