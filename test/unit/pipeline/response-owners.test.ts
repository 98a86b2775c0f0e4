// The owner map's bounds and rules: the newest MAX entries, each for an hour, text within its character
// budget (an entry whose text went keeps its owner), another tenant's id unknown, a restarted replica's ids
// reported as such, and replication between two maps sharing a channel (acceptor threads).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ResponseOwners, TTL_MS } from '../../../src/pipeline/response-owners.ts';

const turn = (text: string) => ({ messages: [{ role: 'user', content: text }], outputTexts: ['ok'] });

test('an entry is found by its tenant only, with its turn', () => {
  const m = new ResponseOwners();
  m.remember('resp_1', 'alpha', '8b', '8b-2', turn('hello'));
  const hit = m.lookup('resp_1', 'alpha');
  assert.ok(hit.ok);
  assert.equal(hit.owner.replicaId, '8b-2');
  assert.equal(hit.owner.poolId, '8b');
  assert.deepEqual(hit.turn, turn('hello'));
  assert.deepEqual(m.lookup('resp_1', 'beta'), { ok: false, why: 'unknown' });
  assert.deepEqual(m.lookup('resp_2', 'alpha'), { ok: false, why: 'unknown' });
});

test('at most maxOwners entries: the oldest go first', () => {
  const m = new ResponseOwners(Date.now, 3);
  for (let i = 0; i < 5; i++) m.remember(`r${i}`, 't', 'p', 'x', turn(String(i)));
  assert.equal(m.size, 3);
  assert.equal(m.lookup('r0', 't').ok, false);
  assert.equal(m.lookup('r1', 't').ok, false);
  assert.equal(m.lookup('r4', 't').ok, true);
});

test('entries expire after the TTL', () => {
  let now = 1_000;
  const m = new ResponseOwners(() => now);
  m.remember('r', 't', 'p', 'x', turn('a'));
  now += TTL_MS - 1;
  assert.equal(m.lookup('r', 't').ok, true);
  now += 2;
  assert.equal(m.lookup('r', 't').ok, false);
  assert.equal(m.size, 0);
});

test('conversation text beyond the budget is dropped oldest first; the owner stays', () => {
  const m = new ResponseOwners(Date.now, 100, 25);
  m.remember('a', 't', 'p', 'x', turn('0123456789')); // 10 + 2 chars
  m.remember('b', 't', 'p', 'y', turn('0123456789'));
  assert.equal(m.chars, 24);
  m.remember('c', 't', 'p', 'z', turn('0123456789'));
  assert.equal(m.chars, 24);
  const a = m.lookup('a', 't');
  assert.ok(a.ok);
  assert.equal(a.turn, null, 'text dropped');
  assert.equal(a.owner.replicaId, 'x', 'owner kept');
  const c = m.lookup('c', 't');
  assert.ok(c.ok && c.turn !== null);
});

test('a replica restart makes its stored ids unreachable, and new ones work', () => {
  const m = new ResponseOwners();
  m.remember('old', 't', 'p', '8b-1', turn('a'));
  m.remember('other', 't', 'p', '8b-2', turn('a'));
  m.replicaRestarted('8b-1');
  assert.deepEqual(m.lookup('old', 't'), { ok: false, why: 'restarted' });
  assert.equal(m.lookup('other', 't').ok, true);
  m.remember('new', 't', 'p', '8b-1', turn('b'));
  assert.equal(m.lookup('new', 't').ok, true);
});

test('maps sharing a channel replicate what each remembers', async () => {
  const name = `owners-test-${process.pid}-${Date.now()}`;
  const a = new ResponseOwners();
  const b = new ResponseOwners();
  a.share(name);
  b.share(name);
  try {
    a.remember('resp_x', 'alpha', '8b', '8b-3', turn('shared'));
    for (let i = 0; i < 50 && !b.lookup('resp_x', 'alpha').ok; i++) await new Promise((r) => setTimeout(r, 5));
    const hit = b.lookup('resp_x', 'alpha');
    assert.ok(hit.ok);
    assert.equal(hit.owner.replicaId, '8b-3');
    assert.deepEqual(hit.turn, turn('shared'));
  } finally {
    a.close();
    b.close();
  }
});

test('a lookup that misses while sharing waits for the id from the other thread, and gives up after a bound', async () => {
  const name = `owners-wait-${process.pid}-${Date.now()}`;
  const a = new ResponseOwners();
  const b = new ResponseOwners();
  assert.equal(a.whenKnown('resp_y', 'alpha'), null, 'not sharing: nothing to wait for');
  a.share(name);
  b.share(name);
  try {
    // The follow-up reaches b before a's broadcast does: b waits instead of answering "unknown".
    const arrival = b.whenKnown('resp_y', 'alpha');
    assert.notEqual(arrival, null);
    assert.equal(b.lookup('resp_y', 'alpha').ok, false);
    a.remember('resp_y', 'alpha', '8b', '8b-1', turn('late'));
    const t0 = performance.now();
    await arrival;
    assert.ok(b.lookup('resp_y', 'alpha').ok, 'known once the broadcast arrived');
    assert.ok(performance.now() - t0 < 200, 'released by the arrival, not by the bound');
    assert.equal(b.whenKnown('resp_y', 'alpha'), null, 'known here: answered at once');

    // An id no thread knows resolves after the bound and still reads as unknown.
    await b.whenKnown('resp_nobody', 'alpha');
    assert.deepEqual(b.lookup('resp_nobody', 'alpha'), { ok: false, why: 'unknown' });
  } finally {
    a.close();
    b.close();
  }
});
