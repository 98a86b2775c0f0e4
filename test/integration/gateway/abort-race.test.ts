// Client hang-ups racing upstream completion, streaming and not, at random moments (before the body
// is sent, while queued, at the first token, just as the replica finishes). Whatever the interleaving, every
// request settles exactly once: one usage record each (200 or 499), nothing left in flight, the in-flight
// ledger back to zero on every replica, no stray process error, and the tenant's quota exact: every lease
// released and the bucket short by exactly what the usage records say was used (a double refund or a leaked
// reservation shows as a difference). The tenant has no refill to speak of, so its bucket is a ledger, and
// long prompts spend most of it first: a refund can only hide when it would overfill the bucket past burst.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { request } from 'node:http';
import { ALPHA_KEY, startStack, waitFor, type TestStack } from '../../helpers/start-gateway.ts';
import type { UsageRecord } from '../../../src/usage/usage-record.ts';
import { LEDGER_INFLIGHT, LEDGER_OUTSTANDING_TOKENS } from '../../../src/registry/inflight-ledger.ts';

let stack: TestStack;
const RACER_KEY = 'sk-test-racer';
const N = 60;
/**
 * The race's 60 requests reserve ~40 tokens each (template, `race N`, max_tokens 6): ~2,400 if all are in flight
 * at once, as on a busy machine. The drain below leaves room for all of them, and takes more than they could be
 * refunded twice, so a double refund shows in the bucket instead of being cut off at burst.
 */
const BURST = 8000;
/** A race request's reservation, an upper bound. */
const RESERVE = 45;
const sha = (k: string): string => createHash('sha256').update(k).digest('hex');
const errors: unknown[] = [];
const onErr = (e: unknown): void => {
  errors.push(e);
};

before(async () => {
  process.on('uncaughtException', onErr);
  process.on('unhandledRejection', onErr);
  stack = await startStack({ config: { tenants: [
    { name: 'alpha', api_keys: [{ sha256: sha(ALPHA_KEY) }], tokens_per_second: 1_000_000, burst_tokens: 10_000_000, max_inflight: 256 },
    // 0.001 token/s: under 0.1 token of refill in the test; room for all N at once, not one lease more
    { name: 'racer', api_keys: [{ sha256: sha(RACER_KEY) }], tokens_per_second: 0.001, burst_tokens: BURST, max_inflight: N },
  ] } });
});

after(async () => {
  await stack.close();
  process.off('uncaughtException', onErr);
  process.off('unhandledRejection', onErr);
});

function fire(id: string, stream: boolean, abortAfterMs: number): Promise<void> {
  return new Promise((resolve) => {
    const body = JSON.stringify({ model: 'gpt-fast', messages: [{ role: 'user', content: `race ${id}` }], max_tokens: 6, stream });
    const req = request(`${stack.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${RACER_KEY}`, 'content-type': 'application/json', 'x-request-id': id },
    });
    let t: NodeJS.Timeout | undefined;
    // Counted from the moment the whole request was written, so the gateway has seen it (and owes a record).
    req.on('finish', () => {
      t = setTimeout(() => {
        req.destroy();
        resolve();
      }, abortAfterMs);
    });
    req.on('response', (res) => {
      res.resume();
      res.on('end', () => {
        clearTimeout(t);
        resolve();
      });
      res.on('error', () => resolve());
    });
    req.on('error', () => resolve());
    req.end(body);
  });
}

const charged = (r: UsageRecord, stream: boolean): number =>
  r.ttft_ms !== null || (r.status === 200 && !stream) ? r.input_tokens + r.output_tokens : 0;

test('random client hang-ups racing completion all settle once and release everything', async () => {
  // Three ~1,250-token prompts leave about 4,100 tokens: the race's reservations fit, its refunds never reach burst.
  for (let i = 0; i < 3; i++) {
    const res = await fetch(`${stack.url}/v1/chat/completions`, {
      method: 'POST', headers: { authorization: `Bearer ${RACER_KEY}`, 'content-type': 'application/json', 'x-request-id': `drain-${i}` },
      body: JSON.stringify({ model: 'gpt-fast', messages: [{ role: 'user', content: `drain ${i} ${'word '.repeat(1200)}` }], max_tokens: 1 }),
    });
    assert.equal(res.status, 200, await res.text());
  }
  const drains = await waitFor(async () => {
    const d = (await stack.usage()).filter((r) => r.request_id.startsWith('drain-'));
    return d.length === 3 ? d : null;
  });
  const drained = drains.reduce((sum, r) => sum + charged(r, false), 0);
  assert.ok(drained > N * RESERVE && drained < BURST - N * RESERVE, `the prompts used ${drained} tokens`);
  const jobs: Array<Promise<void>> = [];
  const delays = new Map<string, number>();
  for (let i = 0; i < N; i++) {
    // 3-400 ms (skewed short) after the request was written: spans body read, routing, waiting for the first token and the end of a short completion.
    const d = 3 + Math.floor(Math.random() * Math.random() * 400);
    delays.set(`race-${i}`, d);
    jobs.push(fire(`race-${i}`, i % 2 === 0, d));
    if (i % 6 === 5) await new Promise((r) => setTimeout(r, 5));
  }
  await Promise.all(jobs);
  await waitFor(() => stack.gateway.inflightCount === 0, 10000, 20);
  const recs = await waitFor(async () => {
    const r = (await stack.usage()).filter((x) => x.request_id.startsWith('race-'));
    return r.length >= N ? r : null;
  }, 5000, 50).catch(async () => {
    const got = new Set((await stack.usage()).map((x) => x.request_id));
    const missing = [...Array(N).keys()].map((i) => `race-${i}`).filter((id) => !got.has(id));
    throw new Error(`no usage record for ${missing.map((m) => `${m}@${delays.get(m)}ms`).join(', ')}`);
  });
  assert.equal(recs.length, N, "one usage record per request");
  if (process.env.REVIEW_DEBUG) console.log(recs.map((r) => `${r.status}/${r.ttft_ms === null ? "-" : "t"}`).join(" "));
  assert.equal(new Set(recs.map((r) => r.request_id)).size, N);
  for (const r of recs) {
    assert.ok(r.status === 200 || r.status === 499, `${r.request_id}: status ${r.status}`);
    assert.equal(r.cancelled, r.status === 499);
  }
  for (const id of ['8b-1', '8b-2']) {
    const slot = stack.gateway.registry.slotOf(id);
    assert.equal(stack.gateway.registry.ledger.get(slot, LEDGER_INFLIGHT), 0, `${id} in flight`);
    assert.equal(stack.gateway.registry.ledger.get(slot, LEDGER_OUTSTANDING_TOKENS), 0, `${id} outstanding tokens`);
  }
  assert.deepEqual(errors, []);
  // The gateway still serves the tenant, and its quota figures after taking this one request show every lease
  // of the race released and the bucket charged exactly what was used: prompt + relayed output for a request
  // that got a first token (or a whole answer), nothing for the rest (finish-request.ts).
  const ok = await fetch(`${stack.url}/v1/chat/completions`, {
    method: 'POST', headers: { authorization: `Bearer ${RACER_KEY}`, 'content-type': 'application/json', 'x-request-id': 'race-after' },
    body: JSON.stringify({ model: 'gpt-fast', messages: [{ role: 'user', content: 'after' }], max_tokens: 2 }),
  });
  assert.equal(ok.status, 200);
  await ok.text();
  assert.equal(ok.headers.get('x-ratelimit-remaining-requests'), String(N - 1), 'no lease of the race is left');
  const probe = await waitFor(async () => (await stack.usage()).find((r) => r.request_id === 'race-after'));
  const used = drained + recs.reduce((sum, r) => sum + charged(r, Number(r.request_id.slice('race-'.length)) % 2 === 0), 0);
  const expected = BURST - used - (probe.input_tokens + 2); // the probe's reservation: prompt + max_tokens
  assert.equal(Number(ok.headers.get('x-ratelimit-remaining-tokens')), expected, `bucket after the race: ${BURST} - ${used} used - the probe's reservation`);
});
