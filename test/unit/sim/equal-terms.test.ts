// Expediter's admission on equal terms (src/router/fit-first.ts): a ranked policy's pick is judged on the
// fleet's best prefix information, not the policy's own estimate, and a pick that does not fit goes to that
// policy's next-ranked candidate that fits; when none fits, the pick stays and says it does not fit.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FitFirst, type FitJudge } from '../../../src/router/fit-first.ts';
import { LeastOutstandingTokensPolicy } from '../../../src/router/policies/least-outstanding-tokens.ts';
import { RoundRobinPolicy } from '../../../src/router/policies/round-robin.ts';
import { Router } from '../../../src/router/route.ts';
import { InflightLedger } from '../../../src/registry/inflight-ledger.ts';
import type { ReplicaRow } from '../../../src/registry/replica-table.ts';
import type { FleetView, RouteRequest, RoutingPolicy } from '../../../src/router/types.ts';
import type { PrefixLookup } from '../../../src/router/prefix-match.ts';

const N = 4;

function fleetOf(ledger: InflightLedger): FleetView {
  const members = [0, 1, 2, 3];
  return {
    ledger,
    candidates: () => members,
    isHealthy: () => true,
    replica: (slot) => ({ id: `r${slot}`, draining: false, adapters: null }),
    residentAdapters: () => [],
    readRow: (_slot: number, _out: ReplicaRow) => false,
    prefixAffinityOff: () => false,
    nowMs: () => 0,
  };
}

/** Admission's verdict stand-in: the slots in `full` cannot take anything; records what it was asked. */
class Judge implements FitJudge {
  full = new Set<number>();
  asked: Array<[number, number]> = [];
  fits(_req: RouteRequest, slot: number, cachedBlocks: number): boolean {
    this.asked.push([slot, cachedBlocks]);
    return !this.full.has(slot);
  }
}

/** The fleet's best index: replica 2 holds the first 5 blocks of every prompt, nobody else anything. */
const events: PrefixLookup = {
  lookup(_hashes, candidates, out) {
    for (let i = 0; i < candidates.length; i++) out[i] = candidates[i] === 2 ? 5 : 0;
    return 5;
  },
};

const req = (): RouteRequest => ({ poolId: 'p', adapter: null, promptTokens: 160, maxTokens: 100, blockHashes: new Float64Array(10).map((_, i) => i + 1), excluded: [] });

function routerWith(policy: RoutingPolicy, judge: Judge, prefix: PrefixLookup | null): { router: Router; ledger: InflightLedger; fit: FitFirst } {
  const ledger = new InflightLedger(N);
  const fleet = fleetOf(ledger);
  const router = new Router(policy as RoutingPolicy & object, fleet);
  const fit = new FitFirst(N, prefix, judge);
  router.setFitFirst(fit);
  return { router, ledger, fit };
}

test('a round-robin pick that does not fit goes to the next replica of its rotation that fits, judged on the events index', () => {
  const judge = new Judge();
  const { router, fit } = routerWith(new RoundRobinPolicy(), judge, events);
  let r = router.route(req());
  assert.ok(r.ok);
  assert.equal(r.slot, 0);
  assert.equal(r.decision.cachedBlocks, 0);
  assert.equal(r.decision.policyCachedBlocks, 0, 'round robin itself believes nothing is cached');
  judge.full = new Set([1, 2]);
  judge.asked = [];
  r = router.route(req()); // the rotation's pick is 1: full, then 2: full, then 3
  assert.ok(r.ok);
  assert.equal(r.slot, 3);
  assert.equal(r.decision.why, 'headroom');
  assert.equal(r.decision.fits, true);
  assert.deepEqual(judge.asked, [[1, 0], [2, 5], [3, 0]], 'each candidate judged with the blocks the events index says it holds');
  assert.equal(fit.moved, 1);
  judge.full = new Set();
  r = router.route(req()); // pick 2: the events index's 5 blocks, not round robin's 0
  assert.ok(r.ok);
  assert.equal(r.slot, 2);
  assert.equal(r.decision.cachedBlocks, 5);
  assert.equal(r.decision.policyCachedBlocks, 0);
});

test('least-outstanding-tokens moves to its next-least-loaded replica; with none fitting the pick stays, marked as not fitting', () => {
  const judge = new Judge();
  const { router, ledger, fit } = routerWith(new LeastOutstandingTokensPolicy(), judge, null);
  // Outstanding tokens: r0 300, r1 100, r2 200, r3 400.
  ledger.dispatch(0, 200, 100, 16, 200);
  ledger.dispatch(1, 50, 50, 16, 50);
  ledger.dispatch(2, 100, 100, 16, 100);
  ledger.dispatch(3, 300, 100, 16, 300);
  judge.full = new Set([1]);
  let r = router.route(req());
  assert.ok(r.ok);
  assert.equal(r.slot, 2, 'the second least loaded');
  judge.full = new Set([0, 1, 2, 3]);
  r = router.route(req());
  assert.ok(r.ok);
  assert.equal(r.slot, 1, 'the policy\'s own choice');
  assert.equal(r.decision.fits, false);
  assert.equal(fit.noneFit, 1);
});
