// Router + the two baseline policies over a small FleetView built here (a real InflightLedger, plain arrays
// for health, draining, configured and resident adapters): round-robin order, least-outstanding-tokens reads
// the ledger, the adapter filter prefers resident replicas, excluded slots, no_healthy_replica vs all_tried.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Router, createPolicy, type RouteResult } from '../../../src/router/route.ts';
import { RoundRobinPolicy } from '../../../src/router/policies/round-robin.ts';
import { LeastOutstandingTokensPolicy } from '../../../src/router/policies/least-outstanding-tokens.ts';
import { InflightLedger } from '../../../src/registry/inflight-ledger.ts';
import type { FleetView, RouteRequest } from '../../../src/router/types.ts';
import { configSchema, type GatewayConfig } from '../../../src/config/schema.ts';

interface ReplicaSpec { id: string; pool: string; healthy?: boolean; draining?: boolean; adapters?: string[] | null; resident?: string[] }

class TestFleet implements FleetView {
  readonly ledger: InflightLedger;
  readonly specs: ReplicaSpec[];

  constructor(specs: ReplicaSpec[]) {
    this.specs = specs;
    this.ledger = new InflightLedger(specs.length);
  }

  candidates(poolId: string): readonly number[] {
    return this.specs.flatMap((s, slot) => (s.pool === poolId ? [slot] : []));
  }

  isHealthy(slot: number): boolean {
    return this.specs[slot]!.healthy !== false;
  }

  replica(slot: number): { id: string; draining: boolean; adapters: readonly string[] | null } {
    const s = this.specs[slot]!;
    return { id: s.id, draining: s.draining === true, adapters: s.adapters ?? null };
  }

  residentAdapters(slot: number): readonly string[] {
    return this.specs[slot]!.resident ?? [];
  }

  readRow(): boolean {
    return false;
  }

  prefixAffinityOff(): boolean {
    return false;
  }

  nowMs(): number {
    return 0;
  }
}

function withPolicy(policy: GatewayConfig['routing']['policy']): GatewayConfig {
  return configSchema.parse({ routing: { policy, prefix_index_entries: 64 }, pools: [{ id: '8b', model: 'm', replicas: [{ id: 'a', url: 'http://127.0.0.1:1' }] }] });
}

const req = (over: Partial<RouteRequest> = {}): RouteRequest => ({
  poolId: '8b', adapter: null, promptTokens: 100, maxTokens: 50, blockHashes: new Float64Array(0), excluded: [], ...over,
});

function ids(router: Router, n: number, r: Partial<RouteRequest> = {}): string[] {
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    const res = router.route(req(r));
    assert.ok(res.ok, JSON.stringify(res));
    out.push(res.replicaId);
  }
  return out;
}

function slotOf(r: RouteResult): number {
  assert.ok(r.ok, JSON.stringify(r));
  return r.slot;
}

const threeReplicas = (): ReplicaSpec[] => [{ id: 'a', pool: '8b' }, { id: 'b', pool: '8b' }, { id: 'c', pool: '8b' }];

test('round-robin hands requests to the pool members in turn', () => {
  const router = new Router(new RoundRobinPolicy(), new TestFleet(threeReplicas()));
  assert.deepEqual(ids(router, 7), ['a', 'b', 'c', 'a', 'b', 'c', 'a']);
});

test('round-robin keeps one cursor per pool', () => {
  const fleet = new TestFleet([{ id: 'a', pool: '8b' }, { id: 'x', pool: '70b' }, { id: 'b', pool: '8b' }, { id: 'y', pool: '70b' }]);
  const router = new Router(new RoundRobinPolicy(), fleet);
  const seen = [ids(router, 1)[0], ids(router, 1, { poolId: '70b' })[0], ids(router, 1)[0], ids(router, 1, { poolId: '70b' })[0], ids(router, 1)[0]];
  assert.deepEqual(seen, ['a', 'x', 'b', 'y', 'a']);
});

test('round-robin skips unhealthy and draining members', () => {
  const fleet = new TestFleet([{ id: 'a', pool: '8b' }, { id: 'b', pool: '8b', healthy: false }, { id: 'c', pool: '8b' }, { id: 'd', pool: '8b', draining: true }]);
  const router = new Router(new RoundRobinPolicy(), fleet);
  assert.deepEqual(ids(router, 4), ['a', 'c', 'a', 'c']);
});

test('least-outstanding-tokens picks the replica with the least work in the ledger', () => {
  const fleet = new TestFleet(threeReplicas());
  const router = new Router(new LeastOutstandingTokensPolicy(), fleet);
  fleet.ledger.dispatch(0, 1000, 200, 16); // a: 1200 outstanding
  fleet.ledger.dispatch(1, 100, 50, 16); //   b: 150
  fleet.ledger.dispatch(2, 400, 100, 16); //  c: 500
  for (let i = 0; i < 4; i++) assert.deepEqual(ids(router, 1), ['b'], 'whatever the rotation, b has least');
  const r = req();
  const res = router.route(r);
  assert.ok(res.ok);
  const header = router.header(r, res.decision);
  assert.match(header, /^replica=b; policy=least-outstanding-tokens(; [a-z_]+=[^;]+)*$/);
  assert.ok(header.includes('; why=policy'), header);
  assert.ok(header.includes('; outstanding_tokens=150; inflight=1'), header);
});

test('least-outstanding-tokens follows the ledger as work is dispatched, relayed and ended', () => {
  const fleet = new TestFleet(threeReplicas());
  const router = new Router(new LeastOutstandingTokensPolicy(), fleet);
  const r1 = router.route(req());
  assert.ok(r1.ok);
  const e1 = fleet.ledger.dispatch(r1.slot, 100, 50, 16);
  const r2 = router.route(req());
  assert.ok(r2.ok);
  assert.notEqual(r2.slot, r1.slot, 'the loaded replica is avoided');
  const e2 = fleet.ledger.dispatch(r2.slot, 100, 50, 16);
  const r3 = router.route(req());
  assert.ok(r3.ok);
  assert.ok(r3.slot !== r1.slot && r3.slot !== r2.slot, 'the idle one is next');
  const e3 = fleet.ledger.dispatch(r3.slot, 10, 5, 16);
  // r1's request got its first token and relayed 40 of 50 tokens: 10 outstanding, less than r3's 15
  fleet.ledger.firstToken(e1);
  fleet.ledger.tokens(e1, 40);
  assert.equal(slotOf(router.route(req())), r1.slot);
  fleet.ledger.end(e3);
  fleet.ledger.end(e2);
  const r4 = router.route(req());
  assert.ok(r4.ok);
  assert.ok(r4.slot === r2.slot || r4.slot === r3.slot, 'ended work leaves the ledger');
  fleet.ledger.end(e1);
});

test('least-outstanding-tokens breaks token ties by requests in flight, then rotates', () => {
  const fleet = new TestFleet(threeReplicas());
  const router = new Router(new LeastOutstandingTokensPolicy(), fleet);
  // a and b both at 0 outstanding tokens, but b has a request in flight (dispatched with nothing left to do)
  const e = fleet.ledger.dispatch(1, 0, 1, 16);
  fleet.ledger.firstToken(e);
  fleet.ledger.tokens(e, 1);
  fleet.ledger.dispatch(2, 10, 10, 16);
  for (let i = 0; i < 3; i++) assert.deepEqual(ids(router, 1), ['a']);
  // an idle fleet spreads its picks
  const idle = new Router(new LeastOutstandingTokensPolicy(), new TestFleet(threeReplicas()));
  assert.deepEqual(new Set(ids(idle, 3)), new Set(['a', 'b', 'c']));
});

test('an adapter request goes only to replicas configured to host it (null = hosts every adapter)', () => {
  const fleet = new TestFleet([
    { id: 'l1', pool: 'lora', adapters: ['acme-sql'] },
    { id: 'l2', pool: 'lora', adapters: ['globex-legal'] },
    { id: 'l3', pool: 'lora', adapters: null },
  ]);
  const router = new Router(new RoundRobinPolicy(), fleet);
  assert.deepEqual(new Set(ids(router, 6, { poolId: 'lora', adapter: 'acme-sql' })), new Set(['l1', 'l3']));
  assert.deepEqual(new Set(ids(router, 6, { poolId: 'lora', adapter: 'globex-legal' })), new Set(['l2', 'l3']));
  assert.deepEqual(new Set(ids(router, 6, { poolId: 'lora', adapter: null })), new Set(['l1', 'l2', 'l3']), 'the base model: any member');
});

test('replicas where the adapter is resident win over ones that would have to load it', () => {
  const fleet = new TestFleet([
    { id: 'l1', pool: 'lora', resident: ['initech-code'] },
    { id: 'l2', pool: 'lora', resident: ['acme-sql', 'globex-legal'] },
    { id: 'l3', pool: 'lora', resident: [] },
    { id: 'l4', pool: 'lora', resident: ['acme-sql'] },
  ]);
  for (const policy of [new RoundRobinPolicy(), new LeastOutstandingTokensPolicy()]) {
    const router = new Router(policy, fleet);
    assert.deepEqual(new Set(ids(router, 8, { poolId: 'lora', adapter: 'acme-sql' })), new Set(['l2', 'l4']), policy.name);
    assert.deepEqual(ids(router, 3, { poolId: 'lora', adapter: 'initech-code' }), ['l1', 'l1', 'l1'], policy.name);
    assert.deepEqual(new Set(ids(router, 8, { poolId: 'lora', adapter: 'acme-support' })), new Set(['l1', 'l2', 'l3', 'l4']), `${policy.name}: resident nowhere, any host`);
  }
});

test('a resident replica that is excluded, unhealthy or not configured for the adapter does not count as resident', () => {
  const fleet = new TestFleet([
    { id: 'l1', pool: 'lora', resident: ['acme-sql'] },
    { id: 'l2', pool: 'lora', resident: ['acme-sql'], healthy: false },
    { id: 'l3', pool: 'lora', resident: ['acme-sql'], adapters: ['globex-legal'] },
    { id: 'l4', pool: 'lora' },
    { id: 'l5', pool: 'lora' },
  ]);
  const router = new Router(new RoundRobinPolicy(), fleet);
  assert.deepEqual(ids(router, 3, { poolId: 'lora', adapter: 'acme-sql' }), ['l1', 'l1', 'l1']);
  assert.deepEqual(new Set(ids(router, 4, { poolId: 'lora', adapter: 'acme-sql', excluded: [0] })), new Set(['l4', 'l5']));
});

test('excluded slots (earlier attempts) are skipped', () => {
  const fleet = new TestFleet(threeReplicas());
  for (const policy of [new RoundRobinPolicy(), new LeastOutstandingTokensPolicy()]) {
    const router = new Router(policy, fleet);
    assert.deepEqual(ids(router, 4, { excluded: [0, 2] }), ['b', 'b', 'b', 'b'], policy.name);
    assert.deepEqual(new Set(ids(router, 4, { excluded: [1] })), new Set(['a', 'c']), policy.name);
  }
});

test('all healthy members tried is all_tried; none healthy is no_healthy_replica', () => {
  const fleet = new TestFleet([{ id: 'a', pool: '8b' }, { id: 'b', pool: '8b', healthy: false }, { id: 'c', pool: '8b', draining: true }]);
  const router = new Router(createPolicy(withPolicy('round-robin'), fleet), fleet);
  assert.deepEqual(router.route(req({ excluded: [0] })), { ok: false, reason: 'all_tried' });
  fleet.specs[0]!.healthy = false;
  assert.deepEqual(router.route(req()), { ok: false, reason: 'no_healthy_replica' });
  assert.deepEqual(router.route(req({ excluded: [0] })), { ok: false, reason: 'no_healthy_replica' });
  assert.deepEqual(router.route(req({ poolId: 'no-such-pool' })), { ok: false, reason: 'no_healthy_replica' });
});

test('an adapter no healthy member hosts is no_healthy_replica, not all_tried', () => {
  const fleet = new TestFleet([{ id: 'l1', pool: 'lora', adapters: ['acme-sql'] }, { id: 'l2', pool: 'lora', adapters: ['globex-legal'], healthy: false }]);
  const router = new Router(new LeastOutstandingTokensPolicy(), fleet);
  assert.deepEqual(router.route(req({ poolId: 'lora', adapter: 'globex-legal' })), { ok: false, reason: 'no_healthy_replica' });
  assert.deepEqual(router.route(req({ poolId: 'lora', adapter: 'acme-sql', excluded: [0] })), { ok: false, reason: 'all_tried' });
});

test('createPolicy builds each configured baseline, and the route header names the replica and policy', () => {
  const rr = createPolicy(withPolicy('round-robin'), new TestFleet(threeReplicas()));
  const lot = createPolicy(withPolicy('least-outstanding-tokens'), new TestFleet(threeReplicas()));
  assert.equal(rr.name, 'round-robin');
  assert.equal(lot.name, 'least-outstanding-tokens');
  const router = new Router(rr, new TestFleet(threeReplicas()));
  const r = req();
  const res = router.route(r);
  assert.ok(res.ok);
  assert.deepEqual([res.slot, res.replicaId], [0, 'a']);
  assert.match(router.header(r, res.decision), /^replica=a; policy=round-robin(; [a-z_]+=[^;]+)*$/, 'replica first, then `; key=value` figures');
});

test('a replica held as stalled is passed over while another can serve, and used when none is left', () => {
  const held = new Set<number>([1]);
  const router = new Router(new RoundRobinPolicy(), new TestFleet(threeReplicas()), { held: (slot) => held.has(slot) });
  assert.deepEqual(ids(router, 4), ['a', 'c', 'a', 'c']);
  held.add(0).add(2);
  assert.deepEqual(new Set(ids(router, 3)), new Set(['a', 'b', 'c']), 'all held: better a likely wait than no answer');
  const r = router.route({ poolId: '8b', adapter: null, promptTokens: 10, maxTokens: 10, blockHashes: new Float64Array(0), excluded: [0, 1, 2] });
  assert.deepEqual(r, { ok: false, reason: 'all_tried' });
});
