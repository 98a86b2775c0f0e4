// The comparison policies, as their references define them: llm-d's scorers and max-score picker, SGLang's
// cache-aware thresholds (Dynamo's cost: dynamo.test.ts); and that createPolicy builds every configured policy.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { configSchema } from '../../../src/config/schema.ts';
import { CandidateTable } from '../../../src/router/candidate-table.ts';
import { MaxScorePicker } from '../../../src/router/pickers/max-score-picker.ts';
import { KvCacheUtilizationScorer } from '../../../src/router/scorers/kv-cache-utilization-scorer.ts';
import { PrefixCacheScorer } from '../../../src/router/scorers/prefix-cache-scorer.ts';
import { QueueScorer } from '../../../src/router/scorers/queue-scorer.ts';
import { SeededRandom } from '../../../src/router/seeded-random.ts';
import type { AnchorPolicy } from '../../../src/router/policies/anchor-policy.ts';
import { kvEventSinkOf } from '../../../src/router/anchors/kv-event-sink.ts';
import { Router, createPolicy } from '../../../src/router/route.ts';
import { FixtureFleet, fixtureConfig, hashes, request } from './fleet-fixture.ts';

const IDS = ['r0', 'r1', 'r2'];

function scores(fn: (out: Float64Array) => void, n: number): number[] {
  const out = new Float64Array(n);
  fn(out);
  return [...out].map((x) => Math.round(x * 1000) / 1000);
}

void test('llm-d scorers: prefix fraction, min-max normalised queue, 1 − KV usage', () => {
  const t = new CandidateTable(3);
  t.begin([0, 1, 2]);
  t.matched.set([0, 5, 10]);
  assert.deepEqual(scores((o) => new PrefixCacheScorer().score(t, 10, o), 3), [0, 0.5, 1]);
  assert.deepEqual(scores((o) => new PrefixCacheScorer().score(t, 0, o), 3), [0, 0, 0]);
  const q = new QueueScorer();
  assert.deepEqual(scores((o) => q.score(3, new Float64Array([0, 5, 10]), o), 3), [1, 0.5, 0]);
  assert.deepEqual(scores((o) => q.score(3, new Float64Array([4, 4, 4]), o), 3), [1, 1, 1]);
  const kv = new KvCacheUtilizationScorer();
  assert.deepEqual(scores((o) => kv.score(3, new Float64Array([0.25, Number.NaN, 1.2]), o), 3), [0.75, 1, 0]);
});

void test('max-score picker: the highest score, ties broken at random but reproducibly', () => {
  const p = new MaxScorePicker(new SeededRandom(7));
  assert.equal(p.pick(3, new Float64Array([1, 3, 2])), 1);
  assert.equal(p.pickMin(3, new Float64Array([1, 3, 0.5])), 2);
  const seen = new Set<number>();
  for (let i = 0; i < 50; i++) seen.add(p.pick(3, new Float64Array([2, 2, 2])));
  assert.deepEqual([...seen].sort(), [0, 1, 2]);
  const a = new MaxScorePicker(new SeededRandom(3));
  const b = new MaxScorePicker(new SeededRandom(3));
  for (let i = 0; i < 20; i++) assert.equal(a.pick(4, new Float64Array(4)), b.pick(4, new Float64Array(4)));
});

function anchor(name: 'llm-d' | 'llm-d-precise' | 'sglang' | 'dynamo'): { fleet: FixtureFleet; router: Router } {
  const fleet = new FixtureFleet(IDS);
  return { fleet, router: new Router(createPolicy(fixtureConfig(IDS, { policy: name }), fleet), fleet) };
}

void test('llm-d: 3 × prefix + 2 × queue + 2 × KV; its index is written at dispatch', () => {
  const { fleet, router } = anchor('llm-d');
  const req = request(hashes(100, 3));
  Object.assign(fleet.rows[0]!, { waiting: 0, kvUsage: 0.9 });
  Object.assign(fleet.rows[1]!, { waiting: 10, kvUsage: 0 });
  Object.assign(fleet.rows[2]!, { waiting: 0, kvUsage: 0 }); // best: queue 1 + kv 1 → 4
  const d = router.route(req);
  assert.ok(d.ok);
  assert.equal(d.slot, 2);
  router.dispatched(req, d.decision);
  Object.assign(fleet.rows[2]!, { waiting: 10, kvUsage: 0.5 }); // 3 × 1 + 0 + 1 = 4 vs r0: 0 + 2 + 0.2 = 2.2
  const again = router.route(request(hashes(100, 3)));
  assert.ok(again.ok);
  assert.deepEqual([again.slot, again.decision.cachedBlocks, again.decision.why], [2, 100, 'prefix']);
});

void test('llm-d\'s approximate index: each replica\'s LRU sized from its scraped num_gpu_blocks', () => {
  const { fleet, router } = anchor('llm-d');
  fleet.rows[0]!.numGpuBlocks = 12;
  fleet.rows[1]!.waiting = 5; // r0 and r2 tie on load; make r0 the pick through the prefix below
  fleet.rows[2]!.waiting = 5;
  const a = request(hashes(10, 11));
  const d = router.route(a);
  assert.ok(d.ok);
  assert.equal(d.slot, 0);
  router.dispatched(a, d.decision);
  router.dispatched(request(hashes(5, 12)), d.decision); // 15 blocks into 12: a's first 3 blocks go
  const policy = router.policy as AnchorPolicy;
  assert.equal(policy.index.count(0), 12);
  assert.equal(policy.index.capacity(0), 12);
  assert.equal(policy.index.capacity(1), 10_000, 'every candidate\'s capacity is read from its row');
  const again = router.route(request(hashes(10, 11)));
  assert.ok(again.ok);
  assert.equal(again.decision.cachedBlocks, 0, 'its run starts at block 0, which the LRU dropped first');
});

void test('llm-d-precise: the prefix score follows KV events (stored, removed, cleared), never dispatches', () => {
  const { fleet, router } = anchor('llm-d-precise');
  const events = kvEventSinkOf(router.policy);
  assert.ok(events !== null);
  const req = request(hashes(20, 13));
  Object.assign(fleet.rows[0]!, { waiting: 4, kvUsage: 0.5 });
  Object.assign(fleet.rows[1]!, { waiting: 0, kvUsage: 0 });
  Object.assign(fleet.rows[2]!, { waiting: 0, kvUsage: 0 });
  const first = router.route(req);
  assert.ok(first.ok);
  router.dispatched(req, first.decision);
  assert.equal((router.policy as AnchorPolicy).index.count(first.slot), 0, 'a dispatch writes nothing');
  // r0's engine reports all 20 blocks: 3 × 1 + 2 × 0 + 2 × 0.5 = 4 against r1, r2: 0 + 2 + 2 = 4; 19 of 20 tip it.
  for (const h of req.blockHashes) events.stored(0, h);
  fleet.rows[0]!.kvUsage = 0.4; // r0: 3 + 0 + 1.2 = 4.2 > 4
  let d = router.route(req);
  assert.ok(d.ok);
  assert.deepEqual([d.slot, d.decision.cachedBlocks], [0, 20]);
  events.removed(0, req.blockHashes[10]!); // 10 / 20: 1.5 + 1.2 = 2.7 < 4
  d = router.route(req);
  assert.ok(d.ok);
  assert.notEqual(d.slot, 0);
  events.stored(0, req.blockHashes[10]!);
  events.cleared(0);
  d = router.route(req);
  assert.ok(d.ok);
  assert.equal(d.decision.cachedBlocks, 0);
});

void test('sglang: best match above the cache threshold unless loads are imbalanced, else least loaded', () => {
  const { fleet, router } = anchor('sglang');
  const req = request(hashes(50, 4));
  const first = router.route(req);
  assert.ok(first.ok);
  assert.equal(first.slot, 0, 'equal loads, no match: the first least loaded');
  router.dispatched(req, first.decision);
  for (let i = 0; i < 10; i++) fleet.ledger.dispatch(0, 10, 10, 16);
  const hit = router.route(request(hashes(50, 4, 20, 9)));
  assert.ok(hit.ok);
  assert.deepEqual([hit.slot, hit.decision.why], [0, 'prefix'], '20/50 = 0.4 > 0.3: the holder despite its load');
  const low = router.route(request(hashes(50, 4, 10, 9)));
  assert.ok(low.ok);
  assert.deepEqual([low.slot, low.decision.why], [1, 'policy'], '10/50 = 0.2: least loaded');
  for (let i = 0; i < 60; i++) fleet.ledger.dispatch(0, 10, 10, 16); // 70 vs 0: imbalanced (> 64 and > 1.5×)
  const imb = router.route(request(hashes(50, 4)));
  assert.ok(imb.ok);
  assert.equal(imb.slot, 1);
});

void test('createPolicy builds every policy the config offers, kv-aware by default', () => {
  const names = configSchema.shape.routing.unwrap().shape.policy.unwrap().options;
  assert.equal(fixtureConfig(IDS).routing.policy, 'kv-aware');
  for (const name of names) {
    const fleet = new FixtureFleet(IDS);
    const policy = createPolicy(fixtureConfig(IDS, { policy: name }), fleet);
    assert.equal(policy.name, name);
    const router = new Router(policy, fleet);
    const req = request(hashes(20, 6));
    const res = router.route(req);
    assert.ok(res.ok, name);
    router.dispatched(req, res.decision);
    router.finished(req, res.decision, 0, null);
    router.replicaReset(res.slot);
    assert.match(router.header(req, res.decision), new RegExp(`^replica=r\\d; policy=${name}; cached_blocks=\\d+; prompt_blocks=20`));
  }
});
