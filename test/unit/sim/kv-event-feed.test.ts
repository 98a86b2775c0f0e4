// The simulator's KV-event feed: an event-fed index mirrors exactly what each engine's prefix cache holds,
// evictions included, for every subscribed gateway; a dead replica is cleared.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { KvEventFeed } from '../../../native-bench/sim/kv-event-feed.ts';
import { chain53 } from '../../../native-bench/sim/prng.ts';
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
