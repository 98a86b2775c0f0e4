// Each routed system's own admission, worked by hand from its upstream defaults:
//   llm-d: utilization detector (llm-d-router .../saturationdetector/utilization/detector.go: mean of
//     max(waiting / 5, kv / 0.8), stale > 200 ms = 1.0) and the legacy admission controller
//     (pkg/epp/requestcontrol/admission.go: only sheddable requests are rejected, when saturation >= 1);
//   dynamo: the router queue (lib/kv-router/src/scheduling/queue.rs: wait while every worker's active prefill
//     tokens exceed threshold × max_num_batched_tokens; FCFS; drained when load drops);
//   sglang, round robin, least-outstanding-tokens: none; kv-aware: Expediter's own.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { fleetFromConfig } from '../../../native-bench/sim/fleet.ts';
import { AdmitAll } from '../../../native-bench/sim/native-admission/admit-all.ts';
import { DynamoRouterQueue } from '../../../native-bench/sim/native-admission/dynamo-queue.ts';
import { nativeAdmission } from '../../../native-bench/sim/native-admission/index.ts';
import { LlmdLegacyAdmission } from '../../../native-bench/sim/native-admission/llm-d-legacy.ts';
import { UtilizationDetector } from '../../../native-bench/sim/native-admission/llm-d-saturation.ts';
import { FleetSim } from '../../../native-bench/sim/sim-run.ts';
import type { SimRequest } from '../../../native-bench/sim/workload-types.ts';
import { parseConfig } from '../../../src/config/load.ts';
import type { AdmissionOutcome, AdmissionRequest, SlaTier } from '../../../src/admission/types.ts';
import type { DynamoPolicy } from '../../../src/router/policies/dynamo.ts';
import { Router, createPolicy } from '../../../src/router/route.ts';
import type { RouteRequest } from '../../../src/router/types.ts';
import { VirtualClock } from '../../../test/mock-replica/engine/clocks.ts';
import { FixtureFleet, fixtureConfig, hashes, request } from '../router/fleet-fixture.ts';

const IDS = ['r0', 'r1', 'r2'];

function admissionReq(route: RouteRequest, tier: SlaTier = 'standard'): AdmissionRequest {
  return { route, n: 1, tier, blockSize: 16, promptParam: 'messages' };
}

function routerFor(policy: string, ids = IDS): { fleet: FixtureFleet; router: Router } {
  const fleet = new FixtureFleet(ids);
  return { fleet, router: new Router(createPolicy(fixtureConfig(ids, { policy }), fleet), fleet) };
}

void test('llm-d utilization detector: mean of max(waiting / 5, kv / 0.8); stale or missing metrics count 1.0', () => {
  const { fleet } = routerFor('llm-d');
  const det = new UtilizationDetector(fleet);
  Object.assign(fleet.rows[0]!, { waiting: 10, kvUsage: 0.2 }); // max(2, 0.25) = 2
  Object.assign(fleet.rows[1]!, { waiting: 0, kvUsage: 0.4 }); // max(0, 0.5) = 0.5
  Object.assign(fleet.rows[2]!, { waiting: 0, kvUsage: 0, lastGoodScrapeMs: fleet.now - 300 }); // stale: 1
  assert.equal(det.saturation('8b'), 3.5 / 3);
  fleet.rows[2]!.lastGoodScrapeMs = fleet.now - 150; // fresh again: 0
  assert.equal(det.saturation('8b'), 2.5 / 3);
  fleet.members = [];
  assert.equal(det.saturation('8b'), 1, 'no endpoints: saturated');
});

void test('llm-d legacy admission: only sheddable (batch) requests are rejected, and only while saturated', () => {
  const { fleet, router } = routerFor('llm-d');
  const adm = new LlmdLegacyAdmission(fleet, router);
  for (const r of fleet.rows) Object.assign(r, { waiting: 6, kvUsage: 0.5 }); // each 1.2: saturated
  const seen: AdmissionOutcome[] = [];
  adm.acquire(admissionReq(request(hashes(4, 1)), 'standard'), (o) => seen.push(o));
  adm.acquire(admissionReq(request(hashes(4, 2)), 'premium'), (o) => seen.push(o));
  adm.acquire(admissionReq(request(hashes(4, 3)), 'batch'), (o) => seen.push(o));
  assert.deepEqual(seen.map((o) => o.kind), ['admitted', 'admitted', 'rejected']);
  const rej = seen[2]!;
  assert.ok(rej.kind === 'rejected');
  assert.deepEqual([rej.rejection.code, rej.rejection.message, rej.queuedMs], ['server_overloaded', 'system saturated, sheddable request dropped', 0]);
  for (const r of fleet.rows) Object.assign(r, { waiting: 4, kvUsage: 0.5 }); // each 0.8: not saturated
  adm.acquire(admissionReq(request(hashes(4, 4)), 'batch'), (o) => seen.push(o));
  assert.equal(seen[3]!.kind, 'admitted');
  assert.equal(adm.rejected, 1);
});

void test('dynamo router queue: waits while every worker is over 16 × max_num_batched_tokens of prefill, FCFS', () => {
  const ids = ['w0', 'w1'];
  const { fleet, router } = routerFor('dynamo', ids);
  const policy = router.policy as DynamoPolicy;
  const clock = new VirtualClock(0);
  // max_num_batched_tokens 100: a worker is busy above 1,600 active prefill tokens.
  const q = new DynamoRouterQueue({ fleet, router, clock, load: policy, maxNumBatchedTokens: 100 });
  const order: string[] = [];
  const admitted = new Map<string, { route: RouteRequest; d: AdmissionOutcome }>();
  const send = (name: string, k: number): void => {
    const route = request(hashes(62, k)); // 62 × 16 + 8 = 1,000 tokens, nothing cached
    q.acquire(admissionReq(route), (o) => {
      order.push(`${name}@${clock.now()}`);
      assert.equal(o.kind, 'admitted');
      if (o.kind === 'admitted') router.dispatched(route, o.decision); // what the gateway records at dispatch
      admitted.set(name, { route, d: o });
    });
  };
  send('a', 1); send('b', 2); // 1,000 on each worker
  send('c', 3); send('d', 4); // 2,000 on each: both busy
  assert.deepEqual(order, ['a@0', 'b@0', 'c@0', 'd@0']);
  assert.equal(q.allBusy('8b'), true);
  send('e', 5); send('f', 6);
  assert.equal(q.depth, 2, 'e and f wait in the router');
  clock.advance(40);
  const a = admitted.get('a')!;
  assert.ok(a.d.kind === 'admitted');
  router.firstToken(a.route, a.d.decision, 40); // a's worker drops to 1,000: not busy
  assert.equal(q.depth, 2, 'drained on the next tick, not inside the token event');
  clock.advance(0);
  assert.deepEqual(order.slice(4), ['e@40'], 'the head goes; its 1,000 tokens make the worker busy again');
  assert.equal(q.depth, 1);
  const b = admitted.get('b')!;
  assert.ok(b.d.kind === 'admitted');
  clock.advance(10);
  router.finished(b.route, b.d.decision, 0, null); // b ends before its first token: its worker drops too
  clock.advance(0);
  assert.deepEqual(order.slice(5), ['f@50']);
  assert.equal(q.queued, 2);
});

void test('native admission per system: none for round robin, LOT and sglang; Expediter\'s for kv-aware', () => {
  const clock = new VirtualClock(0);
  const kinds: Record<string, string> = {};
  for (const name of ['round-robin', 'least-outstanding-tokens', 'sglang', 'llm-d', 'llm-d-precise', 'dynamo', 'kv-aware']) {
    const { fleet, router } = routerFor(name);
    const a = nativeAdmission(router.policy, { fleet, router, clock, profile: 'llama-8b-a100' });
    kinds[name] = a === null ? 'expediter' : a.constructor.name;
  }
  assert.deepEqual(kinds, {
    'round-robin': AdmitAll.name, 'least-outstanding-tokens': AdmitAll.name, sglang: AdmitAll.name,
    'llm-d': LlmdLegacyAdmission.name, 'llm-d-precise': LlmdLegacyAdmission.name, dynamo: DynamoRouterQueue.name, 'kv-aware': 'expediter',
  });
  const { fleet, router } = routerFor('round-robin');
  const none = nativeAdmission(router.policy, { fleet, router, clock, profile: 'llama-8b-a100' })!;
  const seen: string[] = [];
  for (let i = 0; i < 50; i++) none.acquire(admissionReq(request(hashes(4, i)), 'batch'), (o) => seen.push(o.kind));
  assert.equal(seen.filter((k) => k === 'admitted').length, 50);
});

void test('a simulated run under dynamo\'s native admission: the router queue holds the burst, every request completes', () => {
  const fleet = fleetFromConfig('tiny', parseConfig({
    routing: { policy: 'dynamo' },
    pools: [{ id: 't', model: 'tiny-model', mock_profile: 'tiny', max_context_tokens: 2048, replicas: [{ id: 't-1', url: 'http://t-1.sim:8000' }] }],
  }));
  // tiny: max_num_batched_tokens 256, so busy above 4,096 prefill tokens: the 6th of 12 1,000-token prompts waits.
  const reqs: SimRequest[] = Array.from({ length: 12 }, (_, i) => ({
    seq: i, atMs: 100 + i, adapter: null, promptTokens: 1000, outputTokens: 4, maxTokens: 4, blockHashes: hashes(62, 100 + i), replyHashes: null,
  }));
  let i = 0;
  const workload = { name: 'list', next: (): SimRequest | null => reqs[i++] ?? null };
  const sim = new FleetSim({ pool: fleet.pools[0]!, fleet, policy: 'dynamo', workload, durationMs: 1000, gateways: 1, seed: 1, admission: 'native', warmupMs: 0 });
  const queue = sim.gateways[0]!.admission as DynamoRouterQueue;
  assert.ok(queue instanceof DynamoRouterQueue);
  const f = sim.run().figures;
  assert.equal(queue.queued, 7);
  assert.deepEqual([f.offered, f.completed, f.shed, f.failed], [12, 12, 0, 0]);
});
