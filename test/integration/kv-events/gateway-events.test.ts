// routing.prefix_index: events, live: a real gateway subscribed over loopback ZeroMQ to two mock replicas'
// KV events. The gateway's predicted cached tokens (route header cached_blocks, usage predicted_cached_tokens)
// equal what the replica reports, to the block: for a conversation's next turn, for a prefix another client
// evicted behind the gateway's back, and on a second gateway that never saw the first turn. A stopped
// publisher falls back to the approximate index and comes back with its missed batches replayed; a dropped
// range of sequence numbers is recovered by replay; a restarted replica is followed from its new stream.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startGateway, type Gateway } from '../../../src/gateway.ts';
import { createLogger } from '../../../src/logging/logger.ts';
import { Stat } from '../../../src/registry/kv-events/events-index.ts';
import type { PromptTokenizer } from '../../../src/tokenize/prompt-tokenizer.ts';
import { startMockReplica, type MockReplica } from '../../helpers/mock-replicas.ts';
import { freeKvEventsEndpoint } from '../../helpers/port-pair.ts';
import { ALPHA_KEY, startStack, waitFor, type TestStack } from '../../helpers/start-gateway.ts';

const MODEL = 'llama-3.1-8b-instruct';
const BS = 16;
let stack: TestStack;
let second: Gateway | null = null;
const endpoints: string[] = [];

const mockOpts = (kvEvents: string) => ({ profile: 'tiny' as const, model: MODEL, numGpuBlocks: 96, timeScale: 0.1, kvEvents });

before(async () => {
  endpoints.push(await freeKvEventsEndpoint(), await freeKvEventsEndpoint());
  stack = await startStack({
    pools: [{ id: '8b', model: MODEL, aliases: ['gpt-fast'], replicas: endpoints.map(mockOpts) }],
    config: { routing: { prefix_index: 'events' } },
  });
  await synced(stack.gateway);
});
after(async () => {
  await second?.close(0);
  await stack.close();
});

const gw = (): Gateway => stack.gateway;
const mock = (id: string): MockReplica => stack.replicas.get(id)!;

/** Every replica's stream is live and its last batch applied by `g`. */
async function synced(g: Gateway, timeoutMs = 15_000): Promise<void> {
  const ix = g.kvEvents!.index;
  const state = (): string => [...stack.replicas].map(([id, r]) => {
    const slot = g.registry.slotOf(id);
    return `${id}: state ${ix.state(slot)} (${ix.reason(slot)}), replays ${ix.stat(slot, Stat.Replays)}, applied seq ${ix.stat(slot, Stat.LastSeq)}, published ${r.kvEvents!.batches}`;
  }).join('; ');
  await waitFor(() => [...stack.replicas].every(([id, r]) => {
    const slot = g.registry.slotOf(id);
    const batches = r.kvEvents!.batches;
    return ix.isLive(slot) && (batches === 0 || ix.stat(slot, Stat.LastSeq) === batches - 1);
  }), timeoutMs, 20).catch((err: unknown) => {
    throw new Error(`${String(err)}: ${state()}`);
  });
}

interface Answer { replica: string; index: string; cachedBlocks: number; cached: number; promptTokens: number; content: string; requestId: string }

let seq = 0;
async function chat(url: string, messages: Array<{ role: string; content: string }>, maxTokens = 24): Promise<Answer> {
  const requestId = `kv-${process.pid}-${++seq}`;
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ALPHA_KEY}`, 'content-type': 'application/json', 'x-request-id': requestId },
    body: JSON.stringify({ model: 'gpt-fast', max_tokens: maxTokens, messages }),
  });
  assert.equal(res.status, 200, await res.clone().text());
  const route = res.headers.get('x-gateway-route') ?? '';
  const field = (k: string): string => new RegExp(`(?:^|; )${k}=([^;]*)`).exec(route)?.[1] ?? '';
  const body = await res.json() as { choices: Array<{ message: { content: string } }>; usage: { prompt_tokens: number; prompt_tokens_details?: { cached_tokens: number } | null } };
  return {
    replica: field('replica'), index: field('index'), cachedBlocks: Number(field('cached_blocks')), requestId,
    cached: body.usage.prompt_tokens_details?.cached_tokens ?? 0, promptTokens: body.usage.prompt_tokens, content: body.choices[0]!.message.content,
  };
}

/** The replica's reported cached_tokens, from the prediction: vLLM always computes the last prompt token. */
const predicted = (a: Answer): number => Math.min(a.cachedBlocks * BS, Math.floor((a.promptTokens - 1) / BS) * BS);

async function assertExact(a: Answer, what: string): Promise<void> {
  assert.equal(a.index, 'events', `${what}: served by events`);
  assert.equal(predicted(a), a.cached, `${what}: predicted ${a.cachedBlocks} blocks, replica reported ${a.cached} tokens`);
  if (url(a) !== stack.url) return; // the second gateway writes no usage file here
  const rec = (await stack.usage()).find((r) => r.request_id === a.requestId);
  assert.ok(rec !== undefined, `${what}: a usage record`);
  assert.equal(rec.predicted_cached_tokens, a.cached, `${what}: usage record predicted_cached_tokens`);
  assert.equal(rec.cached_tokens, a.cached, `${what}: usage record cached_tokens`);
}
const answeredBy = new Map<string, string>();
const url = (a: Answer): string => answeredBy.get(a.requestId) ?? stack.url;

const topic = (name: string, n: number): string => Array.from({ length: n }, (_, i) => `${name} fact ${i} is worth noting.`).join(' ');

/** Replies the gateway's tokenizer has hashed (inline or on a worker). */
function repliesHashed(): number {
  const st = (gw().services.tokenizer as PromptTokenizer).stats();
  return st.replyInline + st.replyPooled;
}

test("a conversation's next turn: the predicted hit covers the previous prompt and reply, as the replica reports", async () => {
  const hashed = repliesHashed();
  const first = [{ role: 'system', content: topic('astronomy', 40) }, { role: 'user', content: 'Tell me about stars.' }];
  const a1 = await chat(stack.url, first);
  await synced(gw());
  const a2 = await chat(stack.url, [...first, { role: 'assistant', content: a1.content }, { role: 'user', content: 'And planets?' }]);
  assert.equal(a2.replica, a1.replica);
  assert.ok(a2.cached > a1.promptTokens, `the reply's blocks are cached too (${a2.cached} > ${a1.promptTokens})`);
  await assertExact(a2, 'next turn');
  // The engine's events reported the reply's blocks: the gateway neither collected nor hashed the reply.
  assert.equal(repliesHashed(), hashed, 'no reply hashed where events serve the replica');
});

test('a prefix evicted on its replica by traffic the gateway never saw: no hit predicted there', async () => {
  const msgs = [{ role: 'system', content: topic('geology', 40) }, { role: 'user', content: 'Rocks?' }];
  const a1 = await chat(stack.url, msgs, 4);
  await synced(gw());
  // Other clients talk to that replica directly until the prefix is evicted (95 blocks, ~20 per request).
  const target = mock(a1.replica);
  for (let i = 0; i < 8; i++) {
    const res = await fetch(`${target.url}/v1/completions`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, prompt: topic(`filler${i}`, 30), max_tokens: 4, ignore_eos: true }),
    });
    assert.equal(res.status, 200);
    await res.text();
  }
  await synced(gw());
  const a2 = await chat(stack.url, msgs, 4);
  if (a2.replica === a1.replica) assert.ok(a2.cached < a1.promptTokens / 2, 'the prefix is gone from it');
  await assertExact(a2, 'after eviction');
});

test('a second gateway (two acceptor threads) that never saw the first turn predicts the next turn exactly, and both index the same blocks', async () => {
  // Two acceptor threads: their routers read the events index through its SharedArrayBuffer.
  const cfg = { ...stack.cfg, server: { ...stack.cfg.server, threads: 2 } };
  second = await startGateway(cfg, { logger: createLogger('silent'), metricsChannel: `kv-events-second-${process.pid}` });
  await waitFor(async () => (await fetch(`${second!.url}/readyz`)).status === 200, 15_000, 25);
  const first = [{ role: 'system', content: topic('botany', 40) }, { role: 'user', content: 'Leaves?' }];
  const a1 = await chat(stack.url, first);
  await synced(gw());
  await synced(second);
  for (const id of stack.replicas.keys()) {
    const s1 = gw().registry.slotOf(id);
    const s2 = second.registry.slotOf(id);
    assert.equal(second.kvEvents!.index.stat(s2, Stat.Blocks), gw().kvEvents!.index.stat(s1, Stat.Blocks), `${id}: both gateways hold the same blocks`);
  }
  const a2 = await chat(second.url, [...first, { role: 'assistant', content: a1.content }, { role: 'user', content: 'Roots?' }]);
  answeredBy.set(a2.requestId, second.url);
  assert.equal(a2.replica, a1.replica, 'the second gateway finds the conversation where the first left it');
  assert.ok(a2.cachedBlocks > 0);
  await assertExact(a2, 'second gateway');
});

test('a stopped publisher falls back to the approximate index; restarted, its missed batches are replayed and events serve again', async () => {
  const id = '8b-1';
  const slot = gw().registry.slotOf(id);
  const ix = gw().kvEvents!.index;
  const replayedBefore = ix.stat(slot, Stat.Replayed);
  await fetch(`${mock(id).url}/_mock/kv_events`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"publisher":"stop"}' });
  await waitFor(() => !ix.isLive(slot), 10_000, 5);
  assert.equal(ix.reason(slot), 'broken');
  // Traffic while it is down: its batches are numbered and buffered, not delivered.
  const res = await fetch(`${mock(id).url}/v1/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: MODEL, prompt: topic('while-down', 20), max_tokens: 4 }),
  });
  await res.text();
  const probe = [{ role: 'system', content: topic('history', 30) }, { role: 'user', content: 'Kings?' }];
  const during = await chat(stack.url, probe, 4);
  if (during.replica === id) assert.equal(during.index, 'approximate', 'the replica without events is predicted by the approximate index');
  await fetch(`${mock(id).url}/_mock/kv_events`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"publisher":"start"}' });
  await synced(gw());
  assert.ok(ix.stat(slot, Stat.Replayed) > replayedBefore, 'the batches published while it was down came through replay');
  const a = await chat(stack.url, [...probe, { role: 'assistant', content: during.content }, { role: 'user', content: 'Queens?' }], 4);
  await assertExact(a, 'after the publisher came back');
});

test('a dropped range of sequence numbers is recovered through replay', async () => {
  const id = '8b-2';
  const slot = gw().registry.slotOf(id);
  const ix = gw().kvEvents!.index;
  const gaps = ix.stat(slot, Stat.Gaps);
  const replayed = ix.stat(slot, Stat.Replayed);
  await fetch(`${mock(id).url}/_mock/kv_events`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"skip":3}' });
  for (let i = 0; i < 3; i++) {
    const res = await fetch(`${mock(id).url}/v1/completions`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: MODEL, prompt: topic(`dropped${i}`, 12), max_tokens: 2 }),
    });
    await res.text();
  }
  // A gap shows only when the next batch arrives (so it is with vLLM): one more request makes one.
  const next = await fetch(`${mock(id).url}/v1/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: MODEL, prompt: topic('after-the-gap', 12), max_tokens: 2 }),
  });
  await next.text();
  await synced(gw());
  assert.ok(ix.stat(slot, Stat.Gaps) > gaps, 'the gap was seen');
  assert.ok(ix.stat(slot, Stat.Replayed) >= replayed + 3, 'the three withheld batches came through replay');
  // The dropped batches stored blocks that a request sharing their prefix now hits, predicted exactly.
  const res = await fetch(`${mock(id).url}/_mock/state`);
  assert.equal(res.status, 200);
  await res.text();
  const a = await chat(stack.url, [{ role: 'system', content: topic('dropped0', 12) }, { role: 'user', content: 'x' }], 2);
  await assertExact(a, 'after the dropped range');
});

test('a restarted replica (a new engine, sequence from 0, new hashes) is followed from its new stream', async () => {
  const id = '8b-1';
  const old = mock(id);
  const msgs = [{ role: 'system', content: topic('chemistry', 30) }, { role: 'user', content: 'Atoms?' }];
  await old.close();
  const port = Number(new URL(old.url).port);
  stack.replicas.set(id, await startMockReplica({ ...mockOpts(endpoints[0]!), port }));
  const slot = gw().registry.slotOf(id);
  await waitFor(() => gw().registry.isHealthy(slot), 10_000, 20);
  await synced(gw());
  assert.equal(gw().kvEvents!.index.stat(slot, Stat.Blocks), mock(id).engine.snapshot().cached_blocks, 'the index holds exactly what the new engine caches');
  const a = await chat(stack.url, msgs, 2);
  await assertExact(a, 'after the restart');
});

test('/metrics shows each replica on events; a reload without a replica\'s kv_events puts it back on the approximate index', async () => {
  const page = await (await fetch(`${stack.url}/metrics`)).text();
  for (const id of stack.replicas.keys()) {
    assert.match(page, new RegExp(`^gateway_kv_events_live\\{replica="${id}"\\} 1$`, 'm'));
    assert.match(page, new RegExp(`^gateway_kv_events_applied_total\\{replica="${id}"\\} [1-9]`, 'm'));
  }
  assert.match(page, /^gateway_kv_events_fallbacks_total\{replica="8b-1",reason="broken"\} [1-9]/m, 'the stopped publisher was counted');
  assert.match(page, /^gateway_kv_events_replayed_batches_total\{replica="8b-2"\} [1-9]/m);
  // The index's fill: the distinct hashes it holds now, against its room (the default kv_events_entries).
  const ix = gw().kvEvents!.index;
  assert.ok(ix.entries() > 0);
  assert.match(page, /^gateway_kv_events_index_entries [1-9]\d*$/m);
  assert.match(page, new RegExp(`^gateway_kv_events_index_capacity ${ix.capacityEntries}$`, 'm'));
  assert.equal(ix.capacityEntries, stack.cfg.routing.kv_events_entries, 'the default is whole buckets already');
  const next = structuredClone(stack.cfg);
  delete next.pools[0]!.replicas[1]!.kv_events;
  await gw().reload(next);
  const slot = gw().registry.slotOf('8b-2');
  await waitFor(() => gw().kvEvents!.index.state(slot) === 0, 5000, 10);
  const after = await (await fetch(`${stack.url}/metrics`)).text();
  assert.doesNotMatch(after, /^gateway_kv_events_live\{replica="8b-2"\}/m, 'no longer subscribed');
  for (let i = 0; i < 6; i++) {
    const a = await chat(stack.url, [{ role: 'user', content: `reloaded ${i}` }], 2);
    assert.equal(a.index, a.replica === '8b-2' ? 'approximate' : 'events', `${a.replica}`);
  }
});
