// The usage contract for the gateway's own refusals: every completion request that authenticated leaves exactly
// one usage record, whatever its outcome, so a 400 (bad JSON, an invalid field), a 413 (body over
// server.max_body_bytes) and a 415 (not JSON) are billed as nothing but still recorded with their status; a
// request without a valid key leaves none (no tenant to record it against).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { ALPHA_KEY, startStack, waitFor, type TestStack } from '../../helpers/start-gateway.ts';
import type { UsageRecord } from '../../../src/usage/usage-record.ts';

let stack: TestStack;
const MAX_BODY = 4096;

before(async () => {
  stack = await startStack({ config: { server: { host: '127.0.0.1', port: 0, shutdown_grace_ms: 2000, max_body_bytes: MAX_BODY } } });
});

after(async () => {
  await stack.close();
});

async function send(id: string, body: string, headers: Record<string, string>): Promise<{ status: number; code: string }> {
  const res = await fetch(`${stack.url}/v1/chat/completions`, { method: 'POST', headers: { 'x-request-id': id, ...headers }, body });
  const json = await res.json() as { error?: { code?: string } };
  return { status: res.status, code: String(json.error?.code) };
}

const auth = { authorization: `Bearer ${ALPHA_KEY}` };
const json = { 'content-type': 'application/json' };
const valid = (content: string): string => JSON.stringify({ model: 'gpt-fast', messages: [{ role: 'user', content }], max_tokens: 4 });

const cases: Array<{ id: string; status: number; body: string; headers: Record<string, string> }> = [
  { id: 'refused-bad-json', status: 400, body: '{"model": "gpt-fast", "messages": [', headers: { ...auth, ...json } },
  { id: 'refused-bad-field', status: 400, body: JSON.stringify({ model: 'gpt-fast', messages: [{ role: 'user', content: 'x' }], max_tokens: -1 }), headers: { ...auth, ...json } },
  { id: 'refused-too-large', status: 413, body: valid('x'.repeat(2 * MAX_BODY)), headers: { ...auth, ...json } },
  { id: 'refused-not-json', status: 415, body: valid('hi'), headers: { ...auth, 'content-type': 'text/plain' } },
];

test('the gateway\'s own 400, 413 and 415 answers to an authenticated request each leave one usage record', async () => {
  for (const c of cases) assert.equal((await send(c.id, c.body, c.headers)).status, c.status, c.id);
  const recs = await waitFor(async () => {
    const r = (await stack.usage()).filter((x) => x.request_id.startsWith('refused-'));
    return r.length >= cases.length ? r : null;
  }, 10_000);
  const byId = new Map<string, UsageRecord[]>();
  for (const r of recs) byId.set(r.request_id, [...(byId.get(r.request_id) ?? []), r]);
  for (const c of cases) {
    const got = byId.get(c.id) ?? [];
    assert.equal(got.length, 1, `${c.id}: one usage record`);
    const r = got[0]!;
    assert.equal(r.tenant, 'alpha', c.id);
    assert.equal(r.status, c.status, c.id);
    assert.equal(r.cancelled, false, c.id);
    assert.equal(r.output_tokens, 0, c.id);
    assert.equal(r.replica, null, `${c.id}: no replica involved`);
  }
});

test('a request without a valid key leaves no usage record', async () => {
  assert.equal((await send('refused-no-key', valid('hi'), { authorization: 'Bearer sk-wrong', ...json })).status, 401);
  // a later authenticated request's record is written after it: once that one is there, the other would be too
  assert.equal((await send('refused-marker', '{', { ...auth, ...json })).status, 400);
  const recs = await waitFor(async () => {
    const r = await stack.usage();
    return r.some((x) => x.request_id === 'refused-marker') ? r : null;
  }, 10_000);
  assert.equal(recs.filter((r) => r.request_id === 'refused-no-key').length, 0);
});
