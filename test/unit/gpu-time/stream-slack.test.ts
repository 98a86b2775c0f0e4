// Per-stream TPOT slack in virtual time: which streams a new request's prefill pushes past their TPOT target.
// Hand-worked on the 8B defaults (12 equivalent tokens per ms, 2,048-token budget): a short stream cannot
// absorb a 2k-token prompt's ~170 ms stall, a long one can; a stream about to end is unharmed; a stream
// already doomed by the queue ahead is not counted (the request does not turn it into a miss); the model
// reports it through predict() from its own dispatch and first-token hooks; clearMs says when the streams
// harmed will have ended (what admission waits for).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { GpuPrediction, GpuTimeModel } from '../../../src/gpu-time/gpu-time-model.ts';
import { SlackQuery, StreamSlack } from '../../../src/gpu-time/stream-slack.ts';
import { Decision } from '../../../src/router/types.ts';
import { FixtureFleet, fixtureConfig, hashes, request } from '../router/fleet-fixture.ts';

const RATE = 12;
const CHUNK = 2040;

function query(now: number, own: number, backlog = 0, dispatched = 0, done = 0): SlackQuery {
  const q = new SlackQuery();
  q.set(now, 12, 45, RATE, CHUNK, backlog, dispatched, done, own);
  return q;
}

void test('a short stream cannot absorb a 2k-token prefill; a long one can', () => {
  const s = new StreamSlack(2);
  const short = s.add(0, 5, 0); // 4 gaps: slack 4 × (45 − 12) = 132 ms
  s.first(short, 0, 0);
  const long = s.add(1, 40, 0); // 39 gaps: slack 1,287 ms
  s.first(long, 0, 0);
  const own = 2000; // 167 ms of prefill, one chunk's step
  assert.equal(s.harm(0, query(0, own)), 1);
  // It ends after its 4 tokens left at 12 ms each: what admission waits for.
  assert.equal(s.clearMs, 48);
  assert.equal(s.harm(1, query(0, own)), 0);
  assert.equal(s.clearMs, 0);
  // 1,500 tokens (125 ms) still fit the short stream's 132 ms.
  assert.equal(s.harm(0, query(0, 1500)), 0);
});

void test('a stream about to end sees at most one chunk per remaining step', () => {
  const s = new StreamSlack(1);
  const id = s.add(0, 5, 0);
  s.first(id, 0, 0);
  // 3 of its 4 gaps decoded (36 ms, no prefill since): one step left, so a 10k-token prefill stalls it by
  // one chunk at most (170 ms) — still past its 132 ms slack.
  assert.equal(s.harm(0, query(36, 10_000)), 1);
  // All 4 gaps decoded: it is ending, nothing harms it.
  assert.equal(s.harm(0, query(48, 10_000)), 0);
  // A 60-token stream, 58 of 59 gaps done: one chunk (170 ms) fits its 1,947 ms slack.
  const t = new StreamSlack(1);
  const j = t.add(0, 60, 0);
  t.first(j, 0, 0);
  assert.equal(t.harm(0, query(58 * 12, 10_000)), 0);
});

void test('prefill already absorbed counts against the slack; one already doomed is not counted', () => {
  const s = new StreamSlack(1);
  const id = s.add(0, 9, 0); // 8 gaps: slack 264 ms
  s.first(id, 0, 0);
  // 100 ms of prefill done since its first token (1,200 tokens): 164 ms left, a 2,000-token prompt (167 ms) harms it.
  assert.equal(s.harm(0, query(100, 2000, 0, 1200, 1200)), 1);
  // Without that prefill done, it would fit.
  assert.equal(s.harm(0, query(0, 2000)), 0);
  // 4,000 tokens (333 ms) queued ahead already push it past: the request changes nothing for it.
  assert.equal(s.harm(0, query(0, 2000, 4000, 4000, 0)), 0);
});

void test('a stream still prefilling sees only the work sent after it', () => {
  const s = new StreamSlack(1);
  s.add(0, 5, 6000); // dispatched when the slot's work reached 6,000: nothing after it yet
  // The fluid holds 6,000 tokens (all before or including it): only the new request's prefill lands in its gaps.
  assert.equal(s.harm(0, query(0, 2000, 6000, 6000, 0)), 1);
  // It ends once the 6,000 tokens before it are prefilled (500 ms) and its 4 gaps decoded (48 ms).
  assert.equal(s.clearMs, 548);
  assert.equal(s.harm(0, query(0, 1000, 6000, 6000, 0)), 0);
  // 1,000 tokens sent after it already (83 ms): another 1,000 (83 ms) passes its 132 ms slack.
  assert.equal(s.harm(0, query(0, 1000, 7000, 7000, 0)), 1);
});

void test('removed streams and a reset slot harm nothing; records are reused', () => {
  const s = new StreamSlack(1);
  const ids: number[] = [];
  for (let i = 0; i < 600; i++) ids.push(s.add(0, 5, 0));
  assert.equal(s.harm(0, query(0, 2000)), 600);
  for (let i = 0; i < 300; i++) s.remove(ids[i]!);
  s.remove(ids[0]!); // twice: no effect
  assert.equal(s.harm(0, query(0, 2000)), 300);
  s.reset(0);
  assert.equal(s.harm(0, query(0, 2000)), 0);
  const again = s.add(0, 5, 0);
  assert.ok(s.holds(again));
  assert.equal(s.harm(0, query(0, 2000)), 1);
});

void test('a handle from before a reset names nothing: its request ending cannot unlink the stream that reuses its record', () => {
  const s = new StreamSlack(1);
  const old = s.add(0, 5, 0);
  s.reset(0); // the replica restarted with the request in flight
  const fresh = s.add(0, 5, 0); // the new stream takes the freed record
  assert.ok(!s.holds(old) && s.holds(fresh));
  s.first(old, 0, 0); // the old request's late first token stamps nothing
  assert.equal(s.remove(old), false, 'the old request ends: nothing of the new stream is removed');
  assert.equal(s.harm(0, query(0, 2000)), 1, 'the new stream (still prefilling, no first token) is still counted');
  assert.equal(s.clearMs, 48, 'and still waits for its first token: the old one did not stamp it');
  assert.equal(s.remove(fresh), true);
  assert.equal(s.remove(fresh), false, 'removed once');
  assert.equal(s.harm(0, query(0, 2000)), 0);
});

void test('the model counts a short stream on a replica through its hooks, and forgets it at its end', () => {
  const cfg = fixtureConfig(['a', 'b']);
  const fleet = new FixtureFleet(['a', 'b']);
  const model = new GpuTimeModel(cfg.pools, fleet, 5000);
  const shortReq = request(hashes(10, 1), { promptTokens: 160, maxTokens: 5 });
  const d = new Decision();
  d.slot = 0;
  fleet.ledger.dispatch(0, 160, 5, 11);
  model.dispatched(0, shortReq, d);
  fleet.now += 20;
  model.firstToken(0, shortReq, d, 20, true);
  const big = request(hashes(125, 2), { promptTokens: 2000 });
  const p = model.predict(big, 0, 0, new GpuPrediction());
  assert.equal(p.harm, 1);
  assert.equal(model.predict(big, 1, 0, new GpuPrediction()).harm, 0);
  // A short prompt's prefill (a few ms) fits the stream's slack.
  assert.equal(model.predict(request(hashes(4, 3), { promptTokens: 64 }), 0, 0, new GpuPrediction()).harm, 0);
  model.ended(0, shortReq, d, 5);
  assert.equal(model.predict(big, 0, 0, new GpuPrediction()).harm, 0);
});

void test('a replica restart with requests in flight: the requests sent before it end without touching what was sent after', () => {
  const cfg = fixtureConfig(['a']);
  const fleet = new FixtureFleet(['a']);
  const model = new GpuTimeModel(cfg.pools, fleet, 5000);
  const send = (promptTokens: number, maxTokens: number, seed: number): { req: ReturnType<typeof request>; d: Decision } => {
    const req = request(hashes(promptTokens / 16, seed), { promptTokens, maxTokens });
    const d = new Decision();
    d.slot = 0;
    model.dispatched(0, req, d);
    return { req, d };
  };
  // Two requests in flight: one streaming, one still prefilling.
  const streaming = send(160, 5, 1);
  fleet.now += 20;
  model.firstToken(0, streaming.req, streaming.d, 20, true);
  const prefilling = send(3200, 5, 2);
  model.replicaReset(0); // the replica restarted under them
  // After the restart: a short stream that has its first token, and a long prompt still prefilling.
  const shortAfter = send(160, 5, 3);
  fleet.now += 20;
  model.firstToken(0, shortAfter.req, shortAfter.d, 20, true);
  const longAfter = send(3200, 5, 4);
  const big = request(hashes(125, 9), { promptTokens: 2000 });
  const probe = request(hashes(4, 10), { promptTokens: 64 });
  const before = model.predict(big, 0, 0, new GpuPrediction());
  const worstBefore = model.predict(probe, 0, 0, new GpuPrediction()).worstTtftMs;
  assert.ok(before.harm >= 1, `the short stream sent after the restart is at risk from a 2k-token prefill (harm ${before.harm})`);
  // The requests sent before the restart now fail and end (one of them with its first token never seen).
  model.ended(0, streaming.req, streaming.d, 1);
  model.ended(0, prefilling.req, prefilling.d, 0);
  const after = model.predict(big, 0, 0, new GpuPrediction());
  assert.equal(after.harm, before.harm, 'every stream sent after the restart is still counted');
  assert.equal(model.predict(probe, 0, 0, new GpuPrediction()).worstTtftMs, worstBefore, 'the prefill sent after the restart is still ahead, whole');
  // The requests sent after it end normally and leave nothing behind.
  model.firstToken(0, longAfter.req, longAfter.d, 300, true);
  model.ended(0, longAfter.req, longAfter.d, 5);
  model.ended(0, shortAfter.req, shortAfter.d, 5);
  assert.equal(model.predict(big, 0, 0, new GpuPrediction()).harm, 0);
});

void test('a stream running past its forecast length is revised from the forecast given what it has produced, not dropped', () => {
  // Forecast N = 5 (4 gaps, slack 132 ms); past it, the forecast says 20 tokens (19 gaps, slack 627 ms).
  const produced: number[] = [];
  const reply = { slackAfter: (k: number) => { produced.push(k); return 20; } };
  const s = new StreamSlack(1);
  const id = s.add(0, 5, 0, reply);
  s.first(id, 0, 0);
  // 6 steps decoded (72 ms): past the 4 gaps of its forecast. Without the forecast it would count as ended;
  // with it, 13 gaps are left, and a 10k-token prefill (834 ms, ~4.9 chunks of 170 ms) passes its 627 ms.
  assert.equal(s.harm(0, query(72, 10_000)), 1);
  assert.deepEqual(produced, [7], 'revised once, given the 7 tokens it has produced');
  // A 5,000-token prompt (417 ms) fits the revised slack; N stays revised (no second revision).
  assert.equal(s.harm(0, query(72, 5000)), 0);
  assert.equal(produced.length, 1);
  // The same stream with no forecast: ended by its max_tokens, nothing harms it.
  const t = new StreamSlack(1);
  const j = t.add(0, 5, 0);
  t.first(j, 0, 0);
  assert.equal(t.harm(0, query(72, 10_000)), 0);
});
