// Dynamo's KV router, worked by hand from its sources (ai-dynamo/dynamo):
//   lib/llm/src/kv_router/sequence.rs (ActiveSequences: unique active blocks, prefill tokens = isl −
//   overlap × block size until the first token, potential blocks = active + new), lib/kv-router/src/
//   scheduling/selector/default.rs (logit = prefill_load_scale × max(raw prefill blocks − credit × overlap,
//   0) + decode blocks, argmin at temperature 0), lib/kv-router/src/scheduling/config.rs (defaults: KV events
//   on, no output blocks, real hashes for reuse, prefill_load_scale 1, overlap_score_credit 1).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DynamoSequences, dynamoNewTokens } from '../../../src/router/anchors/dynamo-sequences.ts';
import { kvEventSinkOf } from '../../../src/router/anchors/kv-event-sink.ts';
import type { DynamoPolicy } from '../../../src/router/policies/dynamo.ts';
import { Router, createPolicy } from '../../../src/router/route.ts';
import { Decision } from '../../../src/router/types.ts';
import { FixtureFleet, fixtureConfig, hashes, request } from './fleet-fixture.ts';

void test('ActiveSequences: shared blocks count once, prefill tokens net of overlap until the first token', () => {
  const seq = new DynamoSequences(2);
  const sys = hashes(4, 1);
  const a = new Float64Array([...sys, ...hashes(2, 2)]);
  const b = new Float64Array([...sys, ...hashes(1, 3)]);
  const ka = {};
  const kb = {};
  seq.add(ka, 0, a, dynamoNewTokens(100, 0, 16)); // 100 tokens, nothing cached: 100 to prefill
  seq.add(kb, 0, b, dynamoNewTokens(84, 4, 16)); // 84 tokens, 4 blocks cached: 84 − 64 = 20
  assert.equal(seq.activeBlocks(0), 7, '4 shared + 2 + 1');
  assert.equal(seq.activePrefillTokens(0), 120);
  assert.equal(seq.newBlocks(0, new Float64Array([...sys, ...hashes(3, 4)])), 3, 'only the blocks not active there are new');
  assert.equal(seq.newBlocks(1, a), 6);
  seq.prefillDone(ka);
  assert.equal(seq.activePrefillTokens(0), 20);
  seq.free(ka);
  assert.equal(seq.activeBlocks(0), 5, 'the shared prompt stays while b is active');
  seq.free(kb);
  assert.deepEqual([seq.activeBlocks(0), seq.activePrefillTokens(0), seq.size], [0, 0, 0]);
  assert.equal(dynamoNewTokens(40, 3, 16), 0, 'never negative');
});

void test('a reset worker forgets its active requests; their later ends free nothing there', () => {
  const seq = new DynamoSequences(1);
  const k = {};
  seq.add(k, 0, hashes(3, 5), 50);
  seq.reset(0);
  const k2 = {};
  seq.add(k2, 0, hashes(2, 6), 30);
  seq.free(k);
  assert.deepEqual([seq.activeBlocks(0), seq.activePrefillTokens(0)], [2, 30]);
});

function dynamo(): { fleet: FixtureFleet; router: Router; policy: DynamoPolicy } {
  const ids = ['w0', 'w1', 'w2'];
  const fleet = new FixtureFleet(ids);
  const policy = createPolicy(fixtureConfig(ids, { policy: 'dynamo' }), fleet) as DynamoPolicy;
  return { fleet, router: new Router(policy, fleet), policy };
}

void test('cost = (active prefill + isl − overlap × 16) / 16 + active blocks + new blocks; argmin', () => {
  const { router, policy } = dynamo();
  const events = kvEventSinkOf(policy);
  assert.ok(events !== null, 'dynamo reads KV events by default');
  const r = request(hashes(10, 7)); // 10 blocks, 168 tokens
  for (const h of r.blockHashes) events.stored(0, h); // w0's engine caches all 10 blocks
  const x = request(hashes(20, 8)); // another request active on w0: 328 tokens, 20 blocks, nothing cached
  const dx = new Decision();
  dx.slot = 0;
  router.dispatched(x, dx);
  // w0: (328 + 168 − 160) / 16 + 20 + 10 = 21 + 30 = 51; w1, w2: 168 / 16 + 10 = 20.5
  let d = router.route(r);
  assert.ok(d.ok);
  assert.notEqual(d.slot, 0);
  assert.equal(d.decision.cachedBlocks, 0);
  router.firstToken(x, dx, 50); // w0: (168 − 160) / 16 + 30 = 30.5, still above 20.5
  d = router.route(r);
  assert.ok(d.ok);
  assert.notEqual(d.slot, 0);
  router.finished(x, dx, 0, null); // w0: 0.5 + 10 = 10.5 < 20.5
  d = router.route(r);
  assert.ok(d.ok);
  assert.deepEqual([d.slot, d.decision.cachedBlocks, d.decision.why], [0, 10, 'prefix']);
  assert.match(router.header(r, d.decision), /active_blocks=0; active_prefill_tokens=0$/);
});

void test('the overlap comes from KV events only: a dispatch teaches the index nothing', () => {
  const { router, policy } = dynamo();
  const r = request(hashes(10, 9));
  const d = router.route(r);
  assert.ok(d.ok);
  router.dispatched(r, d.decision);
  router.firstToken(r, d.decision, 10);
  router.finished(r, d.decision, 0, null);
  assert.equal(policy.index.count(d.slot), 0);
  kvEventSinkOf(policy)!.stored(d.slot, r.blockHashes[0]!);
  const again = router.route(request(hashes(10, 9)));
  assert.ok(again.ok);
  assert.deepEqual([again.slot, again.decision.cachedBlocks], [d.slot, 1]);
});

void test('a shared active prompt is counted once in the decode term (router_assume_kv_reuse)', () => {
  const { router, policy } = dynamo();
  const sys = hashes(30, 10);
  const withTail = (k: number): ReturnType<typeof request> => request(new Float64Array([...sys, ...hashes(2, k)]), { promptTokens: 32 * 16 });
  for (const h of sys) kvEventSinkOf(policy)!.stored(0, h); // w0 caches the tenant's 30-block prompt
  // Three requests of that tenant active on w0, past their prefill.
  for (let k = 0; k < 3; k++) {
    const dk = new Decision();
    dk.slot = 0;
    dk.cachedBlocks = 30;
    router.dispatched(withTail(20 + k), dk);
    router.firstToken(withTail(20 + k), dk, 5);
  }
  // w0: (512 − 480) / 16 + (30 + 3 × 2 active) + 2 new = 2 + 38 = 40; w1: 512 / 16 + 32 = 64 → w0.
  // Summed per request instead (3 × 32 active) w0 would cost 2 + 96 + 32 = 130 and lose to w1.
  const d = router.route(withTail(99));
  assert.ok(d.ok);
  assert.deepEqual([d.slot, d.decision.cachedBlocks], [0, 30]);
});
