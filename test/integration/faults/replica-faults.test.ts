// Each replica fault with a burst of concurrent requests in flight on a fleet of three mock replica
// processes: nothing reaches a client before the first token, so every request not yet started on the
// failing replica succeeds on another; a stream already under way there ends with one error event. Every
// request leaves one usage record, the quota is settled once and nothing stays in flight.
import assert from 'node:assert/strict';
import { after, afterEach, before, test } from 'node:test';
import { assertAnswers, assertSettled, burst, quotaNow, setFault, startFleet, type Fleet } from './fleet-under-load.ts';

const STREAMS = 30;
let fleet: Fleet;
before(async () => {
  fleet = await startFleet({ inProcess: 3 });
});
afterEach(async () => {
  for (const r of fleet.replicas) await setFault(r.url, { mode: 'none' });
});
after(() => fleet.close());

async function underFault(t: { diagnostic(s: string): void }, name: string, fault: Record<string, unknown>, maxTokens: number): Promise<void> {
  const victim = fleet.replicas[0]!;
  await setFault(victim.url, fault);
  const t0 = Date.now();
  const quota = await quotaNow(fleet);
  const seen = burst(fleet.stack.url, name, STREAMS, maxTokens);
  await Promise.all(seen.map((s) => s.finished));
  const cut = assertAnswers(seen, maxTokens);
  await assertSettled(fleet, seen, quota);
  const onVictim = seen.filter((s) => s.replica === fleet.ids[0]).length;
  t.diagnostic(`${name}: ${seen.length} requests, ${cut.length} cut, ${onVictim} answered by the faulty replica, ${Date.now() - t0} ms`);
  if (fault.mode === 'die_mid_stream') {
    assert.ok(cut.length >= 1, 'round robin sent streams to the dying replica');
    assert.ok(cut.every((s) => s.replica === fleet.ids[0] && s.contentFrames === fault.after_tokens));
  } else {
    assert.equal(cut.length, 0, 'a replica failing before its first token cuts nothing');
  }
  if (fault.mode !== 'slow') assert.equal(seen.filter((s) => s.replica === fleet.ids[0] && s.errorEvents === 0).length, 0, 'the faulty replica answered nothing');
}

test('a replica answering 500 before the first token', (t) => underFault(t, 'e500', { mode: 'error_before_first_token', status: 500 }, 20));
test('a replica answering 503 before the first token', (t) => underFault(t, 'e503', { mode: 'error_before_first_token', status: 503 }, 20));
test('a replica refusing connections', (t) => underFault(t, 'refuse', { mode: 'refuse_connections' }, 20));
test('a replica that hangs (accepts and never answers) until the first-token timeout', (t) => underFault(t, 'hang', { mode: 'hang' }, 20));
test('a replica cutting its streams mid-way', (t) => underFault(t, 'cut', { mode: 'die_mid_stream', after_tokens: 4 }, 40));
test('a slow replica (40 ms between tokens) still answers everything', (t) => underFault(t, 'slow', { mode: 'slow', delay_ms: 40 }, 10));
