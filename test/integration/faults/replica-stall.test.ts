// A replica that stalls (the mock's `hang`: requests accepted and never answered, /metrics and /health still
// fine, nothing running) while non-streamed and streamed requests wait on it. The gateway's first-token and
// request timeouts are set far out (60 s, 120 s), so only stall detection (upstream.stall_timeout_ms, 1.5 s
// here) can move them: every request succeeds elsewhere within seconds, the moved ones say `retries: 1`, quota
// and ledger settle once, the stalled replica is held out of routing and comes back once it answers again.
// And the false positive it must not make: a replica busy with one long generation (its counters moving,
// no byte for ~4 s) is not declared stalled.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startStack, waitFor, ALPHA_KEY } from '../../helpers/start-gateway.ts';
import { assertAnswers, assertSettled, quotaNow, send, setFault, startFleet, MODEL, type Fleet, type Seen } from './fleet-under-load.ts';

const STALL_MS = 1500;
const UPSTREAM = { connect_timeout_ms: 1000, first_token_timeout_ms: 60_000, request_timeout_ms: 120_000, max_attempts: 3, stall_timeout_ms: STALL_MS };

let fleet: Fleet;
before(async () => {
  fleet = await startFleet({ inProcess: 3 }, { config: { upstream: UPSTREAM } });
});
after(() => fleet.close());

async function metric(name: string, kind: string): Promise<number> {
  const text = await (await fetch(`${fleet.stack.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}{`) && l.includes(`kind="${kind}"`));
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(' ') + 1));
}

async function records(seen: readonly Seen[]): Promise<Map<string, { replica: string; retries: number }>> {
  const recs = await fleet.stack.usage();
  return new Map(recs.filter((r) => seen.some((s) => s.id === r.request_id)).map((r) => [r.request_id, { replica: r.replica ?? '', retries: r.retries }]));
}

test('a hung replica costs its waiting requests the stall window, not the request timeout: all succeed elsewhere, once', async (t) => {
  const victim = fleet.ids[0]!;
  await setFault(fleet.replicas[0]!.url, { mode: 'hang' });
  const quota = await quotaNow(fleet);
  const retriesBefore = await metric('gateway_retries_total', 'stalled');
  const t0 = Date.now();
  // 24 non-streamed and 8 streamed at once; round robin gives the hung replica a third of them.
  const seen = Array.from({ length: 32 }, (_, i) => send(fleet.stack.url, `stall-${i}`, i % 4 === 3, 12));
  await Promise.all(seen.map((s) => s.finished));
  const elapsed = Date.now() - t0;
  assert.equal(assertAnswers(seen, 12).length, 0, 'nothing had started on the hung replica: nothing is cut');
  await assertSettled(fleet, seen, quota);
  const recs = await records(seen);
  const moved = [...recs.values()].filter((r) => r.retries === 1);
  t.diagnostic(`${seen.length} requests, ${moved.length} moved off the hung replica, ${elapsed} ms`);
  assert.ok(moved.length >= 5, `round robin sent about a third to the hung replica (${moved.length} moved)`);
  assert.ok([...recs.values()].every((r) => r.replica !== victim && r.retries <= 1), 'each answered elsewhere, after at most one stalled attempt');
  // Well under the 60 s / 120 s timeouts: the stall window, a tick, a scrape, and a loaded machine's slack.
  assert.ok(elapsed < 12_000, `answered in ${elapsed} ms`);
  assert.ok(elapsed >= STALL_MS, 'the moved ones waited the stall window');
  assert.equal(await metric('gateway_retries_total', 'stalled') - retriesBefore, moved.length, 'gateway_retries_total{kind="stalled"} counts them');
  assert.ok(await metric('gateway_upstream_errors_total', 'stalled') >= moved.length);

  // Held out of routing while still hung: the next burst goes elsewhere (at most one probe request may try it
  // once the window has passed, and is moved in turn).
  const quota2 = await quotaNow(fleet);
  const again = Array.from({ length: 12 }, (_, i) => send(fleet.stack.url, `stall-again-${i}`, i % 3 === 2, 12));
  await Promise.all(again.map((s) => s.finished));
  assertAnswers(again, 12);
  await assertSettled(fleet, again, quota2);
  const recs2 = [...(await records(again)).values()];
  assert.ok(recs2.every((r) => r.replica !== victim), 'the hung replica answered nothing');
  assert.ok(recs2.filter((r) => r.retries > 0).length <= 1, `held out: ${recs2.filter((r) => r.retries > 0).length} requests tried it`);

  // It answers again: a probe finds it, its counters move, and it is back in rotation.
  await setFault(fleet.replicas[0]!.url, { mode: 'none' });
  let n = 0;
  await waitFor(async () => {
    const s = send(fleet.stack.url, `stall-back-${n++}`, false, 4);
    await s.finished;
    assert.equal(s.status, 200);
    return s.replica === victim;
  }, 20_000, 100);
  await waitFor(() => fleet.stack.gateway.inflightCount === 0, 5000);
});

test('a replica busy with one long generation (no byte for seconds, its counters moving) is not declared stalled', async (t) => {
  // A100-paced mock engines: 400 output tokens at ~10.5 ms per decode step is ~4 s of silence for a
  // non-streamed request, well past the 1.5 s window, on a replica with nothing else to do.
  const stack = await startStack({
    pools: [{ id: '8b', model: MODEL, aliases: ['gpt-fast'], maxContextTokens: 4096, replicas: [{ profile: 'llama-8b-a100' }, { profile: 'llama-8b-a100' }] }],
    config: { upstream: UPSTREAM, routing: { policy: 'round-robin' } },
  });
  try {
    const t0 = Date.now();
    const res = await fetch(`${stack.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ALPHA_KEY}`, 'content-type': 'application/json', 'x-request-id': 'long-generation' },
      body: JSON.stringify({ model: 'gpt-fast', messages: [{ role: 'user', content: 'write at length' }], max_tokens: 400, ignore_eos: true }),
    });
    const body = await res.json() as { usage: { completion_tokens: number } };
    const elapsed = Date.now() - t0;
    t.diagnostic(`400 tokens in ${elapsed} ms`);
    assert.equal(res.status, 200);
    assert.equal(body.usage.completion_tokens, 400);
    assert.ok(elapsed > 2 * STALL_MS, `the generation outlasted the window twice over (${elapsed} ms)`);
    const rec = (await stack.usage()).find((r) => r.request_id === 'long-generation');
    assert.equal(rec?.retries, 0, 'answered by the replica it was sent to, never moved');
    assert.equal(stack.gateway.services.stalls?.stalledAttempts, 0);
  } finally {
    await stack.close();
  }
});
