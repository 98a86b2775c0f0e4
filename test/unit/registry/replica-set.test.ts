import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseConfig } from '../../../src/config/load.ts';
import type { GatewayConfig } from '../../../src/config/schema.ts';
import { InflightLedger, LEDGER_RESERVED_BLOCKS } from '../../../src/registry/inflight-ledger.ts';
import type { ToPoller } from '../../../src/registry/poll/protocol.ts';
import { ReplicaSet } from '../../../src/registry/replica-set.ts';

type R = { id: string; port: number; drain?: boolean; weight?: number; pool?: string };

function cfg(replicas: R[], maxReplicas = 3): GatewayConfig {
  const pools = ['a', 'b'].map((id) => ({
    id, model: `m-${id}`, replicas: replicas.filter((r) => (r.pool ?? 'a') === id)
      .map((r) => ({ id: r.id, url: `http://127.0.0.1:${r.port}`, drain: r.drain ?? false, weight: r.weight ?? 1 })),
  })).filter((p) => p.replicas.length > 0);
  return parseConfig({ pools, registry: { max_replicas: maxReplicas } });
}

function setup(slots = 3): { set: ReplicaSet; ledger: InflightLedger; sent: ToPoller[] } {
  const ledger = new InflightLedger(slots);
  const sent: ToPoller[] = [];
  return { set: new ReplicaSet(slots, ledger, (m) => sent.push(m)), ledger, sent };
}

void test('assigns the lowest free slots in config order and builds per-pool candidates', () => {
  const { set, sent } = setup();
  set.apply(cfg([{ id: 'x', port: 1 }, { id: 'y', port: 2, pool: 'b' }, { id: 'z', port: 3, weight: 0 }]));
  assert.deepEqual([set.slotOf('x'), set.slotOf('z'), set.slotOf('y')], [0, 1, 2]);
  assert.deepEqual(set.candidates('a'), [0], 'weight 0 is out of rotation');
  assert.deepEqual(set.candidates('b'), [2]);
  assert.deepEqual(sent.map((m) => m.type), ['assign', 'assign', 'assign']);
  assert.ok(Object.isFrozen(set.candidates('a')));
});

void test('a removed replica drains until its ledger is empty, then its slot is reused with a new assignId and a zeroed ledger', () => {
  const { set, ledger, sent } = setup();
  set.apply(cfg([{ id: 'x', port: 1 }, { id: 'y', port: 2 }]));
  const oldAssign = set.assignIds[1];
  const e = ledger.dispatch(1, 10, 10, 16);
  set.apply(cfg([{ id: 'x', port: 1 }]));
  assert.deepEqual(set.candidates('a'), [0]);
  assert.equal(set.info(1)?.draining, true);
  assert.deepEqual(set.memberSlots(), [0, 1], 'a draining replica is still a member');
  assert.equal(set.sweep(), 1, 'still draining');
  assert.equal(sent.filter((m) => m.type === 'unassign').length, 0);
  ledger.end(e);
  assert.equal(set.sweep(), 0);
  assert.deepEqual(sent.at(-1), { type: 'unassign', slot: 1, assignId: oldAssign });
  assert.equal(set.info(1), undefined);
  set.apply(cfg([{ id: 'x', port: 1 }, { id: 'w', port: 9 }]));
  assert.equal(set.slotOf('w'), 1);
  assert.notEqual(set.assignIds[1], oldAssign);
  assert.equal(ledger.get(1, LEDGER_RESERVED_BLOCKS), 0);
});

void test('a replica removed then re-added while draining is revived in place', () => {
  const { set, ledger } = setup();
  set.apply(cfg([{ id: 'x', port: 1 }, { id: 'y', port: 2 }]));
  const assign = set.assignIds[1];
  ledger.dispatch(1, 10, 10, 16);
  set.apply(cfg([{ id: 'x', port: 1 }]));
  set.apply(cfg([{ id: 'x', port: 1 }, { id: 'y', port: 2 }]));
  assert.equal(set.slotOf('y'), 1);
  assert.equal(set.assignIds[1], assign);
  assert.equal(set.info(1)?.draining, false);
  assert.deepEqual(set.candidates('a'), [0, 1]);
  assert.equal(set.drainingSlots(), 0);
});

void test('a replica whose url changes is a new replica: the old slot drains, a new one is assigned', () => {
  const { set, ledger } = setup();
  set.apply(cfg([{ id: 'x', port: 1 }]));
  ledger.dispatch(0, 10, 10, 16);
  set.apply(cfg([{ id: 'x', port: 5 }]));
  assert.equal(set.slotOf('x'), 1);
  assert.equal(set.info(1)?.url, 'http://127.0.0.1:5');
  assert.equal(set.info(0)?.draining, true);
  assert.deepEqual(set.candidates('a'), [1]);
});

void test('when every slot is held by draining replicas, an added replica waits for one to free', () => {
  const { set, ledger, sent } = setup(2);
  set.apply(cfg([{ id: 'x', port: 1 }, { id: 'y', port: 2 }], 2));
  const e = ledger.dispatch(1, 10, 10, 16);
  const warn = console.warn;
  console.warn = () => {};
  try {
    set.apply(cfg([{ id: 'x', port: 1 }, { id: 'n', port: 3 }], 2));
  } finally {
    console.warn = warn;
  }
  assert.equal(set.slotOf('n'), -1);
  ledger.end(e);
  set.sweep();
  assert.equal(set.slotOf('n'), 1);
  assert.deepEqual(set.candidates('a'), [0, 1]);
  assert.deepEqual(sent.at(-1), { type: 'assign', slot: 1, assignId: set.assignIds[1], replicaId: 'n', url: 'http://127.0.0.1:3', poolBlockSize: 16 });
});

void test('the drain flag takes a replica out of candidates but keeps its slot and id', () => {
  const { set } = setup();
  set.apply(cfg([{ id: 'x', port: 1 }, { id: 'y', port: 2 }]));
  set.apply(cfg([{ id: 'x', port: 1, drain: true }, { id: 'y', port: 2 }]));
  assert.deepEqual(set.candidates('a'), [1]);
  assert.equal(set.slotOf('x'), 0);
  assert.equal(set.info(0)?.draining, true);
  assert.equal(set.drainingSlots(), 0, 'a drained (not removed) replica is not freed');
});
