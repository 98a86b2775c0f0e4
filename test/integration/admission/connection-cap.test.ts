// No silent queue below admission: with 2 connections per replica and a 1 s first-token timeout, 20
// concurrent streams of ~1.2 s each used to wait for a socket inside the upstream client, time out there,
// be "retried" into the other replica's full queue and end as 504 upstream_timeout with retries 2, though no
// replica ever saw them. Waiting for a connection is admission now: every stream is served or gets 429
// server_overloaded with a Retry-After; no 504, no retry, no first-token timeout.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { ALPHA_KEY, startStack, waitFor, type TestStack } from '../../helpers/start-gateway.ts';
import { setFault } from '../mock-replica/http-client.ts';

let stack: TestStack;
const STREAMS = 20;

before(async () => {
  stack = await startStack({
    pools: [{ id: '8b', model: 'llama-3.1-8b-instruct', aliases: ['gpt-fast'], replicas: [{ profile: 'tiny' }, { profile: 'tiny' }] }],
    config: {
      upstream: { connect_timeout_ms: 1000, first_token_timeout_ms: 1000, max_attempts: 3, connections_per_replica: 2 },
      // The mocks below emit a token every 10-15 ms: the drain-rate estimate starts from that pace. A 30 s
      // queue allowance lets later waves wait for the first one's connections even on a busy machine, where the
      // measured pace (and so the predicted wait) is several times slower; the standard tier's TTFT budget is
      // raised to match (the default 400 ms would leave no time to wait in the queue).
      admission: { tpot_target_ms: 15, queue_ms_by_tier: { standard: 30_000 }, ttft_ms_by_tier: { standard: 30_000 } },
    },
  });
  for (const r of stack.replicas.values()) await setFault(r.url, { mode: 'slow', delay_ms: 10 });
});

after(async () => {
  await stack.close();
});

test('20 streams against 2 connections per replica: each is served or refused with 429 and Retry-After; none times out', async (t) => {
  const t0 = performance.now();
  const results = await Promise.all(Array.from({ length: STREAMS }, async (_, i) => {
    const res = await fetch(`${stack.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ALPHA_KEY}`, 'content-type': 'application/json', 'x-request-id': `cap-${i}` },
      body: JSON.stringify({ model: 'gpt-fast', messages: [{ role: 'user', content: `stream ${i}` }], max_tokens: 100, stream: true, ignore_eos: true }),
    });
    return { status: res.status, retryAfter: res.headers.get('retry-after'), body: await res.text() };
  }));
  const elapsed = performance.now() - t0;
  const served = results.filter((r) => r.status === 200);
  const shed = results.filter((r) => r.status === 429);
  assert.equal(served.length + shed.length, STREAMS, `statuses: ${results.map((r) => r.status).join(',')}`);
  assert.ok(served.length > 4, `more than one wave served (4 connections): ${served.length}`);
  for (const r of served) assert.ok(r.body.endsWith('data: [DONE]\n\n'), 'a served stream is complete');
  for (const r of shed) {
    assert.equal((JSON.parse(r.body) as { error: { code: string } }).error.code, 'server_overloaded');
    assert.match(r.retryAfter ?? '', /^[1-9][0-9]*$/);
  }
  const records = await waitFor(async () => {
    const recs = (await stack.usage()).filter((u) => u.request_id.startsWith('cap-'));
    return recs.length === STREAMS ? recs : null;
  }, 15_000, 20);
  assert.deepEqual([...new Set(records.map((u) => u.retries))], [0], 'no attempt was retried');
  assert.equal(stack.gateway.services.upstream.waitedForConnection, 0, 'no attempt waited for a socket inside the upstream client');
  // Streams beyond the first four waited in the admission queue for a connection, and say so.
  const waited = records.filter((u) => u.status === 200 && u.queue_ms > 0);
  assert.equal(waited.length, served.length - 4, 'served after a wait in the queue');
  assert.ok(records.every((u) => u.replica !== null || u.status === 429), 'only a shed request reached no replica');
  const metrics = await (await fetch(`${stack.url}/metrics`)).text();
  assert.doesNotMatch(metrics, /gateway_upstream_errors_total\{kind="first_token_timeout"\} [1-9]/);
  assert.match(metrics, /gateway_admission_decisions_total\{pool="8b",result="admitted"\} [1-9]/);
  t.diagnostic(`served ${served.length}, shed ${shed.length} (Retry-After ${shed.map((r) => r.retryAfter).join(',')}), queued then served ${records.filter((u) => u.status === 200 && u.queue_ms > 0).length}, ${elapsed.toFixed(0)} ms`);
});
