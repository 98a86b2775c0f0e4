// Retry-After is a promise: a request shed with it, sent again after that long while the fleet drains as the
// GPU-time model predicted, is admitted. In virtual time, on the demo's 70B figures (idle decode step 48.56 ms
// against a 50 ms TPOT target): with a long stream on each replica a new request's TPOT is the batch's decode
// step, which no waiting for prefill to decay cures; only the streams ending do, ~100 s on. Also: a request that can never fit any
// replica's KV is a 400, not a 429; and with no replica's state readable there is no estimate to give, so the
// answer is 503, not a 429 with an invented Retry-After.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { GpuPrediction } from '../../../src/gpu-time/gpu-time-model.ts';
import type { RouteRequest } from '../../../src/router/types.ts';
import { harness, kindOf, type Harness, type Spec } from './fixture.ts';

/** The demo's 70B pool (config/demo.yaml): Llama 3.1 70B on two A100s. */
const ENGINE_70B = {
  prefill_tokens_per_second: 2400, decode_base_ms: 48.5, decode_per_seq_ms: 0.06, decode_per_1k_kv_tokens_ms: 0.1,
  adapter_load_ms: 80, tpot_target_ms: 50, prefill_attention_coef: 9.4e-6,
};
const big = (id: string): Spec => ({ id, blocks: 100_000, usage: 0, running: 0 });
const SHORT = { promptTokens: 100, maxTokens: 40 };
/** The fixture's poll interval (fixture.ts): a shed request comes back one poll after the replica goes idle. */
const POLL_MS = 100;
/** ~100 s of decoding at the 70B step. */
const LONG = { promptTokens: 100, maxTokens: 2000 };
const route = (r: { promptTokens: number; maxTokens: number }): RouteRequest => ({ poolId: 'p', adapter: null, ...r, blockHashes: new Float64Array(0), excluded: [] });

/** Each replica's streams, by name: the rows show them running, as a scrape would. */
function streamsOn(h: Harness): Map<number, string[]> {
  const by = new Map<number, string[]>();
  for (const [name, o] of h.outcomes) {
    if (o.kind !== 'admitted' || !h.entries.has(name)) continue;
    by.set(o.slot, [...(by.get(o.slot) ?? []), name]);
  }
  return by;
}

function scrape(h: Harness, by: Map<number, string[]>): void {
  h.fleet.specs.forEach((s, slot) => { s.running = by.get(slot)?.length ?? 0; });
  h.fleet.scrape();
}

void test('shed with Retry-After, sent again after it while the fleet drains as predicted: admitted', () => {
  const h = harness([big('a'), big('b')], { gpuTime: true, engine: ENGINE_70B });
  // Long streams (2,100 tokens of context each) until one is refused, each with its first token (decoding):
  // one per replica, as a second's context puts the 70B decode step past its TPOT limit.
  let n = 0;
  for (;; n++) {
    h.ask(`s${n}`, LONG);
    const o = h.outcomes.get(`s${n}`)!;
    if (o.kind !== 'admitted') break;
    h.fleet.ledger.firstToken(h.entries.get(`s${n}`)!);
    h.router.firstToken(route(LONG), o.decision, 60);
    scrape(h, streamsOn(h));
  }
  assert.equal(n, 2, 'one long stream per replica');
  h.outcomes.delete(`s${n}`);
  h.ask('late', LONG);
  const shed = h.outcomes.get('late')!;
  assert.ok(shed.kind === 'rejected' && shed.rejection.code === 'server_overloaded', kindOf(h, 'late'));
  assert.equal(shed.queuedMs, 0, 'shed at arrival');
  const retryMs = shed.rejection.retryAfterSeconds! * 1000;
  // The fleet drains as the model predicts: each replica's streams end when it said that replica goes idle.
  const by = streamsOn(h);
  const endsAt = new Map<number, number>();
  const t0 = h.clock.now();
  for (const slot of by.keys()) endsAt.set(slot, t0 + h.gpu.predict(route(LONG), slot, 0, new GpuPrediction()).idleMs);
  for (let t = 100; t <= retryMs; t += 100) {
    h.clock.advance(100);
    for (const [slot, names] of by) {
      if (h.clock.now() < endsAt.get(slot)!) continue;
      for (const name of names) {
        const o = h.outcomes.get(name)!;
        if (o.kind === 'admitted') h.router.ended(route(LONG), o.decision, LONG.maxTokens);
        h.finish(name);
        h.entries.delete(name);
      }
      by.delete(slot);
    }
    scrape(h, streamsOn(h));
  }
  h.outcomes.delete('late');
  h.ask('late', LONG);
  assert.equal(kindOf(h, 'late').split(':')[0], 'admitted', `after its Retry-After (${retryMs} ms): ${kindOf(h, 'late')}`);
});

void test('a request larger than every replica\'s whole KV is a 400, whatever n; one that fits a replica\'s KV is not', () => {
  const h = harness([{ id: 'a', blocks: 100, usage: 0, running: 0 }], { gpuTime: true }); // 1,600 tokens
  h.ask('n4', { promptTokens: 200, maxTokens: 400, n: 4 }); // 200 + 1,600: never fits
  assert.equal(kindOf(h, 'n4'), 'rejected:context_length_exceeded');
  h.ask('n3', { promptTokens: 200, maxTokens: 400, n: 3 }); // 1,400: the idle replica takes it whole
  assert.equal(kindOf(h, 'n3'), 'admitted:a');
});

void test('no replica\'s state readable and nothing learned: no estimate, so 503 rather than a 429 with a made-up Retry-After', () => {
  const h = harness([{ id: 'a', blocks: 100_000, usage: 0, running: 0, scrapedAt: undefined }], { gpuTime: true });
  h.ask('r', SHORT);
  assert.equal(kindOf(h, 'r'), 'unroutable:no_healthy_replica');
});

void test('nor is it much longer than the wait: a burst of short replies on the 70B pool is told to come back when a replica goes idle', () => {
  const h = harness([big('a'), big('b')], { gpuTime: true, engine: ENGINE_70B });
  // A burst: short requests (40 tokens, ~2 s of decoding at the 70B step) arriving together, until one is
  // shed. The prefill arriving with them is what the model would wait out over its averaging window.
  let shed = '';
  for (let n = 0; n < 50 && shed === ''; n++) {
    h.ask(`b${n}`, SHORT);
    const o = h.outcomes.get(`b${n}`)!;
    if (o.kind === 'admitted') h.fleet.ledger.firstToken(h.entries.get(`b${n}`)!);
    else shed = `b${n}`;
    scrape(h, streamsOn(h));
  }
  const o = h.outcomes.get(shed);
  assert.ok(o !== undefined && o.kind === 'rejected' && o.rejection.code === 'server_overloaded', shed === '' ? 'none shed' : kindOf(h, shed));
  // The first replica to go idle, by the model's own reply forecast for what runs there.
  let idle = Number.POSITIVE_INFINITY;
  for (const slot of streamsOn(h).keys()) idle = Math.min(idle, h.gpu.predict(route(SHORT), slot, 0, new GpuPrediction()).idleMs);
  assert.ok(Number.isFinite(idle), 'the model predicts when the replicas go idle');
  const bound = Math.max(1, Math.ceil((idle + POLL_MS) / 1000));
  assert.ok(o.rejection.retryAfterSeconds! <= bound, `Retry-After ${o.rejection.retryAfterSeconds} s, a replica idle in ${Math.round(idle)} ms`);
});
