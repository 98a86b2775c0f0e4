// The acceptance, live: with kv-aware (the default policy), requests sharing a new ~2,000-token system
// prompt land on one replica of four and that replica reports the prefix as cached. Real gateway, four real
// mock replicas, route header on. The mocks run at their 8B profile's speed: sped up 20×, their steps were a
// few ms, as long as a loaded machine's stalls, from which the GPU-time model can learn the holder as slower
// than the replicas it has never seen (held to the profile); a loaded run once saw request 9 go to a cold one.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { ALPHA_KEY, startStack, waitFor, type TestStack } from '../../helpers/start-gateway.ts';
import { startMockReplica } from '../../mock-replica/server.ts';

const MODEL = 'llama-3.1-8b-instruct';
const replica = { profile: 'llama-8b-a100' as const, model: MODEL, timeScale: 1 };
let stack: TestStack;
before(async () => {
  stack = await startStack({
    pools: [{ id: '8b', model: MODEL, aliases: ['gpt-fast'], maxContextTokens: 131072, replicas: [replica, replica, replica, replica] }],
    config: { expose_route_header: true },
  });
});
after(async () => {
  await stack.close();
});

/** ~2,000 tokens of a system prompt no replica has seen. */
const SYSTEM = Array.from({ length: 700 }, (_, i) => `rule ${i}: answer plainly.`).join(' ');

async function ask(user: string): Promise<{ replica: string; why: string; cachedBlocks: number; promptTokens: number; cached: number; route: string }> {
  const res = await fetch(`${stack.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ALPHA_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt-fast', max_tokens: 8, messages: [{ role: 'system', content: SYSTEM }, { role: 'user', content: user }] }),
  });
  assert.equal(res.status, 200);
  const route = res.headers.get('x-gateway-route') ?? '';
  const field = (k: string): string => new RegExp(`(?:^|; )${k}=([^;]*)`).exec(route)?.[1] ?? '';
  const body = await res.json() as { usage: { prompt_tokens: number; prompt_tokens_details?: { cached_tokens: number } } };
  return { replica: field('replica'), why: field('why'), cachedBlocks: Number(field('cached_blocks')), promptTokens: body.usage.prompt_tokens, cached: body.usage.prompt_tokens_details?.cached_tokens ?? 0, route };
}

void test('ten requests sharing a new 2,000-token system prompt land on one replica, and the last nine hit it', async () => {
  const answers = [];
  for (let i = 0; i < 10; i++) answers.push(await ask(`question number ${i}: what is ${i} plus ${i}?`));
  const first = answers[0]!;
  assert.ok(first.promptTokens > 1800, `system prompt of ${first.promptTokens} tokens`);
  assert.equal(first.why, 'cold');
  assert.equal(first.cached, 0);
  for (const [i, a] of answers.entries()) {
    assert.equal(a.replica, first.replica, `request ${i} on ${a.replica}: ${a.route}`);
    if (i === 0) continue;
    assert.equal(a.why, 'prefix', `request ${i}`);
    assert.ok(a.cached >= first.promptTokens - 64, `request ${i} cached ${a.cached} of ${a.promptTokens}`);
  }
});

void test('a replica restarted empty is no longer credited with the prefix it held', async () => {
  const before = await ask('one more question');
  assert.equal(before.why, 'prefix');
  const reg = stack.gateway.registry;
  const slot = reg.slotOf(before.replica);
  const restarts: number[] = [];
  reg.onRestart((s) => restarts.push(s));
  const old = stack.replicas.get(before.replica)!;
  await old.close();
  stack.replicas.set(before.replica, await startMockReplica({ ...replica, port: Number(new URL(old.url).port) }));
  await waitFor(() => restarts.includes(slot) && reg.isHealthy(slot), 10_000, 25);
  const after = await ask('and after the restart?');
  assert.equal(after.cachedBlocks, 0, 'the router no longer believes it holds the prefix');
  assert.equal(after.why, 'cold');
  assert.equal(after.cached, 0, 'and the replica indeed computed it all');
  const again = await ask('and once more');
  assert.equal(again.replica, after.replica);
  assert.ok(again.cached >= again.promptTokens - 64, 'the new copy is learnt again');
});
