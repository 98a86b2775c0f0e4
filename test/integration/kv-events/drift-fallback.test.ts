// The events index checks itself, end to end: a real gateway on a mock replica whose published KV events stop
// telling its evictions (the mock's `withhold_removed` hook: live batches lose their BlockRemoved events, the
// replay buffer keeps them). The index then predicts hits on blocks the replica no longer holds; the replica's
// reported cached tokens contradict it, the replica falls back to the approximate index (route header
// `index=approximate`, `gateway_kv_events_fallbacks_total{reason="drift"}`), its index is rebuilt from a
// replay, and once its predictions agree with the reports again it serves from events.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Stat } from '../../../src/registry/kv-events/events-index.ts';
import { freeKvEventsEndpoint } from '../../helpers/port-pair.ts';
import { ALPHA_KEY, startStack, waitFor, type TestStack } from '../../helpers/start-gateway.ts';

const MODEL = 'llama-3.1-8b-instruct';
const ID = '8b-1';
let stack: TestStack;

before(async () => {
  const kvEvents = await freeKvEventsEndpoint();
  stack = await startStack({
    // 48 blocks: four of the ~10-block conversations below fit, the fifth evicts the oldest.
    pools: [{ id: '8b', model: MODEL, replicas: [{ profile: 'tiny', model: MODEL, numGpuBlocks: 48, timeScale: 0.1, kvEvents }] }],
    // Targets no loaded test machine misses: this file is about the index, and a shed would cut its sequence.
    config: { routing: { prefix_index: 'events' }, admission: { tpot_target_ms: 5000, ttft_ms_by_tier: { standard: 10_000 } } },
  });
  await caughtUp();
});
after(() => stack.close());

const slot = (): number => stack.gateway.registry.slotOf(ID);
const ix = () => stack.gateway.kvEvents!.index;

/** The subscriber has applied every batch the mock built. */
async function caughtUp(): Promise<void> {
  const mock = stack.replicas.get(ID)!.kvEvents!;
  await waitFor(() => mock.batches === 0 || ix().stat(slot(), Stat.LastSeq) === mock.batches - 1, 10_000, 10);
}

async function hook(body: object): Promise<void> {
  const res = await fetch(`${stack.replicas.get(ID)!.url}/_mock/kv_events`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  assert.equal(res.status, 200, await res.text());
}

interface Answer { index: string; cachedBlocks: number; cached: number }

async function chat(topic: string): Promise<Answer> {
  const content = Array.from({ length: 18 }, (_, i) => `${topic} fact ${i} is worth noting.`).join(' ');
  const res = await fetch(`${stack.url}/v1/chat/completions`, {
    method: 'POST', headers: { authorization: `Bearer ${ALPHA_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, max_tokens: 2, messages: [{ role: 'system', content }, { role: 'user', content: 'ok?' }] }),
  });
  assert.equal(res.status, 200);
  const route = res.headers.get('x-gateway-route') ?? '';
  const field = (k: string): string => new RegExp(`(?:^|; )${k}=([^;]*)`).exec(route)?.[1] ?? '';
  const body = await res.json() as { usage: { prompt_tokens_details?: { cached_tokens: number } | null } };
  return { index: field('index'), cachedBlocks: Number(field('cached_blocks')), cached: body.usage.prompt_tokens_details?.cached_tokens ?? 0 };
}

const metric = async (re: RegExp): Promise<number> => Number(re.exec(await (await fetch(`${stack.url}/metrics`)).text())?.[1] ?? Number.NaN);

test('events that keep evicted blocks: predictions the replica contradicts send it to the approximate index, and it comes back once they agree', async (t) => {
  // Honest events first: a repeated conversation is predicted from events, exactly.
  await chat('warmup');
  await caughtUp();
  const warm = await chat('warmup');
  assert.equal(warm.index, 'events');
  assert.ok(warm.cached > 0 && warm.cachedBlocks * 16 >= warm.cached, 'predicted from events, confirmed');

  // The publisher stops telling evictions. Eight conversations pass through a cache that holds four.
  await hook({ withhold_removed: true });
  const topics = Array.from({ length: 8 }, (_, i) => `topic${i}`);
  for (const t of topics) await chat(t);
  await caughtUp();
  // Asked again: the events still list every one, the replica evicted most of them.
  let contradicted = 0;
  for (const t of topics) {
    const a = await chat(t);
    if (a.index === 'events' && a.cachedBlocks * 16 > a.cached + 16) contradicted++;
    await caughtUp();
  }
  assert.ok(contradicted >= 4, `the index predicted hits the replica did not report (${contradicted} of 8)`);
  // The publisher tells the truth again; the drift's replay rebuilds the index from the (complete) replay buffer.
  await hook({ withhold_removed: false });
  await waitFor(() => ix().reason(slot()) === 'drift' && !ix().isLive(slot()), 5000, 10);
  assert.equal((await chat('probe')).index, 'approximate', 'the route header shows the fallback');
  assert.equal(await metric(/^gateway_kv_events_fallbacks_total\{replica="8b-1",reason="drift"\} (\S+)$/m), 1);
  const fell = await metric(/^gateway_kv_events_prediction_precision\{replica="8b-1"\} (\S+)$/m);
  assert.ok(fell < 0.7, `precision below the threshold (${fell})`);
  assert.ok(await metric(/^gateway_prefix_prediction_error_tokens_sum\{pool="8b",replica="8b-1"\} (\S+)$/m) > 0,
    'the per-replica error histogram shows the over-prediction');

  // Conversations asked twice: the second time, the events (checked while the approximate index routes) predict
  // the hit the replica reports. Eight of them are the evidence the judge needs.
  for (let i = 0; i < 14 && !ix().isLive(slot()); i++) {
    await chat(`again${i}`);
    await caughtUp();
    await chat(`again${i}`);
  }
  await waitFor(() => ix().isLive(slot()), 5000, 10);
  assert.equal((await chat('again0')).index, 'events', 'agreeing again: served from events');
  const back = await metric(/^gateway_kv_events_prediction_precision\{replica="8b-1"\} (\S+)$/m);
  assert.ok(back >= 0.9, `precision back over 0.9 (${back})`);
  t.diagnostic(`precision: ${fell.toFixed(3)} at the fallback, ${back.toFixed(3)} back on events; ${contradicted} of 8 re-asked conversations over-predicted`);
  assert.equal(await metric(/^gateway_kv_events_live\{replica="8b-1"\} (\S+)$/m), 1);
});
