// Client hang-ups racing upstream completion, streaming and not, at random moments (before the body
// is sent, while queued, at the first token, just as the replica finishes). Whatever the interleaving, every
// request settles exactly once: one usage record each (200 or 499), nothing left in flight, the in-flight
// ledger back to zero on every replica, no stray process error.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { ALPHA_KEY, startStack, waitFor, type TestStack } from '../../helpers/start-gateway.ts';
import { LEDGER_INFLIGHT, LEDGER_OUTSTANDING_TOKENS } from '../../../src/registry/inflight-ledger.ts';

let stack: TestStack;
const errors: unknown[] = [];
const onErr = (e: unknown): void => {
  errors.push(e);
};

before(async () => {
  process.on('uncaughtException', onErr);
  process.on('unhandledRejection', onErr);
  stack = await startStack();
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
      headers: { authorization: `Bearer ${ALPHA_KEY}`, 'content-type': 'application/json', 'x-request-id': id },
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

test('random client hang-ups racing completion all settle once and release everything', async () => {
  const N = 60;
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
  // The gateway still serves.
  const ok = await fetch(`${stack.url}/v1/chat/completions`, {
    method: 'POST', headers: { authorization: `Bearer ${ALPHA_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt-fast', messages: [{ role: 'user', content: 'after' }], max_tokens: 2 }),
  });
  assert.equal(ok.status, 200);
});
