// The simulator's KV-event feed: an event-fed index mirrors exactly what each engine's prefix cache holds,
// evictions included, for every subscribed gateway; a dead replica is cleared.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { fleetFromConfig } from '../../../native-bench/sim/fleet.ts';
import { KvEventFeed } from '../../../native-bench/sim/kv-event-feed.ts';
import { chain53 } from '../../../native-bench/sim/prng.ts';
import { FleetSim } from '../../../native-bench/sim/sim-run.ts';
import type { SimRequest } from '../../../native-bench/sim/workload-types.ts';
import { parseConfig } from '../../../src/config/load.ts';
import type { AnchorPolicy } from '../../../src/router/policies/anchor-policy.ts';
import { BlockHolders } from '../../../src/router/anchors/block-holders.ts';
import type { KvEventSink } from '../../../src/router/anchors/kv-event-sink.ts';
import { VirtualClock } from '../../../test/mock-replica/engine/clocks.ts';
import { MockEngine } from '../../../test/mock-replica/engine/engine.ts';
import type { EngineRequestEvents } from '../../../test/mock-replica/engine/types.ts';

function chainOf(key: number, blocks: number): Float64Array {
  const out = new Float64Array(blocks);
  let parent = 0;
  for (let i = 0; i < blocks; i++) out[i] = parent = chain53(parent, key, i);
  return out;
}

function sinkOver(idx: BlockHolders): KvEventSink {
  return { stored: (s, h) => { idx.store(s, h); }, removed: (s, h) => { idx.remove(s, h); }, cleared: (s) => { idx.clearSlot(s); } };
}

const quiet: EngineRequestEvents = { onFirstToken() {}, onToken() {}, onFinish() {} };

function serve(engine: MockEngine, clock: VirtualClock, id: string, blocks: Float64Array): void {
  engine.add({ id, promptTokens: blocks.length * 16 + 4, blockHashes: blocks, outputTokens: 2, finishReason: 'length', adapter: null }, quiet);
  clock.runUntilIdle();
}

void test('two gateways\' indexes hold exactly the engine\'s cached blocks, through eviction and a kill', () => {
  const clock = new VirtualClock(0);
  // 40 blocks of KV: a second 30-block prompt evicts most of the first one's cached blocks.
  const engine = new MockEngine({ profile: 'tiny', numGpuBlocks: 40 }, clock);
  const feed = new KvEventFeed();
  const a = new BlockHolders(2);
  const b = new BlockHolders(2);
  feed.subscribe(sinkOver(a));
  feed.subscribe(sinkOver(b));
  feed.attach(1, engine);
  const first = chainOf(1, 30);
  serve(engine, clock, 'x', first);
  assert.equal(a.count(1), 30);
  const out = new Int32Array(1);
  assert.equal(a.lookup(first, [1], out), 30);
  const second = chainOf(2, 30);
  serve(engine, clock, 'y', second);
  const cached = engine.snapshot().cached_blocks;
  assert.equal(a.count(1), cached, 'the index holds as many blocks as the engine caches');
  let held = 0;
  for (const h of first) if (a.holds(1, h)) held++;
  assert.ok(held < 30, 'evicted blocks were removed');
  assert.equal(b.count(1), a.count(1), 'every subscriber hears every event');
  assert.equal(a.count(0), 0, 'events carry the replica\'s slot');
  feed.detach(1, engine);
  assert.deepEqual([a.count(1), b.count(1)], [0, 0]);
  serve(engine, clock, 'z', chainOf(3, 5));
  assert.equal(a.count(1), 0, 'a detached engine publishes nothing');
});

void test('nothing is attached while no gateway subscribes', () => {
  const clock = new VirtualClock(0);
  const engine = new MockEngine({ profile: 'tiny' }, clock);
  const feed = new KvEventFeed();
  feed.attach(0, engine);
  serve(engine, clock, 'x', chainOf(4, 10));
  assert.equal(feed.delivered, 0);
});

void test('in a run, each gateway\'s event-fed index ends holding what each engine caches; a dead replica holds nothing', () => {
  const fleet = fleetFromConfig('tiny', parseConfig({
    routing: { policy: 'llm-d-precise' },
    pools: [{ id: 't', model: 'tiny-model', mock_profile: 'tiny', max_context_tokens: 2048,
      replicas: [1, 2, 3].map((i) => ({ id: `t-${i}`, url: `http://t-${i}.sim:8000` })) }],
  }));
  const reqs: SimRequest[] = Array.from({ length: 60 }, (_, i) => ({
    seq: i, atMs: 50 + 40 * i, adapter: null, promptTokens: 300, outputTokens: 3, maxTokens: 3, blockHashes: chainOf(i, 18), replyHashes: null,
  }));
  let next = 0;
  const workload = { name: 'list', next: (): SimRequest | null => reqs[next++] ?? null };
  const sim = new FleetSim({
    pool: fleet.pools[0]!, fleet, policy: 'llm-d-precise', workload, durationMs: 3000, gateways: 2, seed: 2,
    kills: [{ replica: 't-3', atS: 1 }], restarts: [{ replica: 't-1', atS: 1.5 }],
  });
  sim.run();
  for (const gw of sim.gateways) {
    const idx = (gw.router.policy as AnchorPolicy).index;
    assert.equal(idx.count(2), 0, 'the killed replica');
    for (const slot of [0, 1]) assert.equal(idx.count(slot), sim.engines[slot]!.snapshot().cached_blocks, `slot ${slot}`);
  }
  assert.ok(sim.engines[0]!.snapshot().cached_blocks > 0, 'the restarted replica cached blocks again');
});
