// One replica's stream without sockets: the engine's hashes mapped to the gateway's through token ids and the
// parent chain, gaps replayed, an unrecoverable gap resynced, restarts cleared, silence and a broken stream
// falling back, and events serving again once they flow.
import assert from 'node:assert/strict';
import { before, test } from 'node:test';
import { blockHashes, initBlockHasher } from '../../../src/tokenize/block-hash.ts';
import { EventsIndex, Stat } from '../../../src/registry/kv-events/events-index.ts';
import { ReplicaStream } from '../../../src/registry/kv-events/replica-stream.ts';
import { encodeBatch, type KvEvent } from '../../../src/registry/kv-events/wire.ts';

before(() => initBlockHasher());

const BS = 16;
const SLOT = 2;
const tokens = (n: number, base: number): number[] => Array.from({ length: n * BS }, (_, i) => (base * 7 + i) % 128000);

function stored(hashes: bigint[], parent: bigint | null, toks: number[], lora: string | null = null, extraKeys: Array<unknown[] | null> | null = null): KvEvent {
  return { type: 'BlockStored', blockHashes: hashes, parentBlockHash: parent, tokenIds: toks, blockSize: BS, loraId: null, loraName: lora, medium: 'GPU', extraKeys, groupIdx: null, kvCacheSpecKind: null, kvCacheSpecSlidingWindow: null };
}
const removed = (hashes: bigint[]): KvEvent => ({ type: 'BlockRemoved', blockHashes: hashes, medium: 'GPU', groupIdx: null });
const batch = (...events: KvEvent[]): Uint8Array => encodeBatch({ ts: Date.now() / 1000, events, dataParallelRank: 0 });

let clock = 1_000_000;
const TICK = 100;

function setup(capacity = 1000): { ix: EventsIndex; s: ReplicaStream; replays: number[] } {
  const ix = new EventsIndex({ entries: 4096, slots: 4 });
  const replays: number[] = [];
  const s = new ReplicaStream(ix, { slot: SLOT, blockSize: BS, silenceTicks: 3, tickMs: TICK, capacityBlocks: () => capacity, nowMs: () => clock }, { requestReplay: (from) => replays.push(from) });
  return { ix, s, replays };
}

/** Connect and answer the first replay with nothing: a fresh engine. */
function fresh(): ReturnType<typeof setup> {
  const t = setup();
  t.s.onConnected();
  assert.deepEqual(t.replays, [0], 'on connect, the whole history is asked for');
  t.s.onReplayEnd(true);
  assert.equal(t.s.live, true, 'an empty replay: nothing was ever cached');
  return t;
}

function run(ix: EventsIndex, ours: Float64Array): number {
  const out = new Int32Array(1);
  ix.lookup(ours, [SLOT], out);
  return out[0]!;
}

test("BlockStored is keyed by the gateway's own hashes, rebuilt from token ids and the parent chain; BlockRemoved drops them", () => {
  const { ix, s } = fresh();
  const t = tokens(5, 1);
  const ours = blockHashes(t, BS, null);
  s.onLive(0, batch(stored([11n, 12n], null, t.slice(0, 2 * BS))));
  s.onLive(1, batch(stored([13n, 14n, 0xffff_ffff_ffff_fff0n], 12n, t.slice(2 * BS))));
  assert.equal(run(ix, ours), 5, 'the engine\'s hashes are arbitrary; the gateway\'s are what it looks up');
  s.onLive(2, batch(removed([13n])));
  assert.equal(run(ix, ours), 2, 'block 2 evicted: the engine\'s lookup stops there');
  assert.equal(ix.stat(SLOT, Stat.Blocks), 4);
  assert.equal(ix.stat(SLOT, Stat.Events), 3);
});

test('LoRA blocks are keyed by the adapter name; unknown parents and foreign extra keys are counted as unmapped', () => {
  const { ix, s } = fresh();
  const t = tokens(2, 2);
  s.onLive(0, batch(stored([21n, 22n], null, t, 'acme-sql', [['acme-sql'], ['acme-sql']])));
  assert.equal(run(ix, blockHashes(t, BS, 'acme-sql')), 2);
  assert.equal(run(ix, blockHashes(t, BS, null)), 0, 'the base model\'s blocks differ');
  s.onLive(1, batch(stored([31n], 999n, tokens(1, 3))));
  s.onLive(2, batch(stored([41n], null, tokens(1, 4), null, [['salt-xyz']])));
  assert.equal(ix.stat(SLOT, Stat.Unmapped), 2);
  assert.equal(run(ix, blockHashes(tokens(1, 4), BS, null)), 0, 'cache_salt blocks never match a gateway hash');
});

test('a gap is replayed from the first missing batch; the live batch that showed it is applied after', () => {
  const { ix, s, replays } = fresh();
  const t = tokens(3, 5);
  const ours = blockHashes(t, BS, null);
  const p0 = batch(stored([51n], null, t.slice(0, BS)));
  const p1 = batch(stored([52n], 51n, t.slice(BS, 2 * BS)));
  const p2 = batch(stored([53n], 52n, t.slice(2 * BS)));
  s.onLive(0, p0);
  s.onLive(2, p2);
  assert.deepEqual(replays, [0, 1], 'replay asked from the first missing batch');
  s.onReplay(1, p1);
  s.onReplay(2, p2);
  s.onReplayEnd(true);
  assert.equal(run(ix, ours), 3);
  assert.equal(s.live, true);
  assert.equal(ix.stat(SLOT, Stat.Gaps), 1);
  assert.equal(s.nextSeq, 3);
});

test('a gap the replay buffer no longer covers: resync, approximate until the engine stored its capacity of blocks', () => {
  const t0 = setup(3);
  const { ix, s } = t0;
  s.onConnected();
  s.onReplayEnd(true);
  s.onLive(0, batch(stored([61n], null, tokens(1, 6))));
  s.onLive(5, batch(stored([62n], null, tokens(1, 7))));
  s.onReplay(4, batch(stored([63n], null, tokens(1, 8)))); // the buffer starts past seq 1
  s.onReplayEnd(true);
  assert.equal(s.live, false);
  assert.equal(ix.reason(SLOT), 'gap');
  assert.equal(run(ix, blockHashes(tokens(1, 6), BS, null)), 0, 'what came before the gap is forgotten');
  assert.equal(run(ix, blockHashes(tokens(1, 7), BS, null)), 1, 'what came after is indexed');
  s.onLive(6, batch(stored([64n], null, tokens(1, 9))));
  assert.equal(s.live, true, 'three blocks stored since: the cache has turned over');
});

test('a sequence going back to 0 is a new engine: the index is cleared and follows the new one', () => {
  const { ix, s } = fresh();
  s.onLive(0, batch(stored([71n], null, tokens(1, 10))));
  s.onLive(1, batch(stored([72n], 71n, tokens(1, 11))));
  s.onLive(0, batch(stored([81n], null, tokens(1, 12))));
  assert.equal(run(ix, blockHashes(tokens(1, 10), BS, null)), 0);
  assert.equal(run(ix, blockHashes(tokens(1, 12), BS, null)), 1);
  assert.equal(s.live, true);
});

test('silence while the engine computes KV falls back; the next batch serves events again', () => {
  const { ix, s } = fresh();
  s.onLive(0, batch(stored([91n], null, tokens(1, 13))));
  const tick = (miss: number, scrapeLagMs = 20): void => {
    clock += TICK;
    s.tick(miss, clock - scrapeLagMs, clock);
  };
  tick(1000, 150); // a scrape older than the batch: not a baseline
  tick(5000); // the work the batch reported shows up late in the counters: this is the baseline
  for (let i = 0; i < 4; i++) tick(5000 + 15 * 16); // quiet, and the engine computed under 16 blocks
  assert.equal(s.live, true, 'an idle (or nearly idle) engine publishes nothing: quiet alone is not silence');
  tick(5000 + 16 * 16);
  assert.equal(s.live, false);
  assert.equal(ix.reason(SLOT), 'silent');
  assert.equal(ix.stat(SLOT, Stat.Fallbacks), 1);
  s.onLive(1, batch(removed([91n])));
  assert.equal(s.live, true);
});

test('a broken stream falls back; on reconnect the same publisher is recognised by its last batch and events resume', () => {
  const { ix, s, replays } = fresh();
  const p0 = batch(stored([101n], null, tokens(1, 14)));
  s.onLive(0, p0);
  s.onDisconnected();
  assert.equal(s.live, false);
  assert.equal(ix.reason(SLOT), 'broken');
  s.onConnected();
  assert.equal(replays[replays.length - 1], 0, 'from the last applied batch');
  s.onReplay(0, p0);
  s.onReplay(1, batch(stored([102n], 101n, tokens(1, 15))));
  s.onReplayEnd(true);
  assert.equal(s.live, true);
  assert.equal(run(ix, blockHashes([...tokens(1, 14), ...tokens(1, 15)], BS, null)), 2);
});

test('on reconnect a publisher without our last batch is a new process: cleared and replayed from 0', () => {
  const { ix, s, replays } = fresh();
  s.onLive(0, batch(stored([111n], null, tokens(1, 16))));
  s.onLive(1, batch(stored([112n], 111n, tokens(1, 17))));
  s.onDisconnected();
  s.onConnected();
  assert.equal(replays[replays.length - 1], 1);
  s.onReplayEnd(true); // nothing at seq 1: the new process has published less than that
  assert.equal(replays[replays.length - 1], 0);
  assert.equal(run(ix, blockHashes(tokens(1, 16), BS, null)), 0);
  s.onReplay(0, batch(stored([121n], null, tokens(1, 18))));
  s.onReplayEnd(true);
  assert.equal(s.live, true);
  assert.equal(run(ix, blockHashes(tokens(1, 18), BS, null)), 1);
});

test('a replay without an answer is asked again; with none after three, the unknown history is resynced', () => {
  const t = setup(2);
  t.s.onConnected();
  t.s.onReplayEnd(false);
  t.s.onReplayEnd(false);
  assert.deepEqual(t.replays, [0, 0, 0], 'asked three times');
  assert.equal(t.s.live, false);
  t.s.onReplayEnd(false);
  assert.equal(t.ix.reason(SLOT), 'gap', 'what the engine cached before is unknown');
  assert.equal(t.s.live, false);
  t.s.onLive(0, batch(stored([131n, 132n], null, tokens(2, 19))));
  assert.equal(t.s.live, true, 'two blocks stored: a 2-block cache has turned over');
});

test('a replay without an answer while live batches continue from where the stream stands: they prove continuity', () => {
  const { s, replays } = fresh();
  const p0 = batch(stored([141n], null, tokens(1, 20)));
  s.onLive(0, p0);
  s.onDisconnected();
  s.onConnected();
  s.onLive(1, batch(stored([142n], 141n, tokens(1, 21))));
  s.onReplayEnd(false);
  assert.equal(replays.length, 2, 'not asked again');
  assert.equal(s.live, true);
  assert.equal(s.nextSeq, 2);
});

test('on reconnect a publisher whose batch at our last sequence has other bytes is a new process too', () => {
  const { ix, s, replays } = fresh();
  s.onLive(0, batch(stored([151n], null, tokens(1, 22))));
  s.onDisconnected();
  s.onConnected();
  assert.equal(replays[replays.length - 1], 0, 'asks from its last batch');
  // The new process has published more than we had: its seq 0 exists, with other blocks.
  s.onReplay(0, batch(stored([161n], null, tokens(1, 23))));
  s.onReplay(1, batch(stored([162n], 161n, tokens(1, 24))));
  s.onReplayEnd(true);
  assert.equal(replays[replays.length - 1], 0, 'replayed again from 0');
  assert.equal(run(ix, blockHashes(tokens(1, 22), BS, null)), 0, 'the old process\'s blocks are gone');
  s.onReplay(0, batch(stored([161n], null, tokens(1, 23))));
  s.onReplay(1, batch(stored([162n], 161n, tokens(1, 24))));
  s.onReplayEnd(true);
  assert.equal(s.live, true);
  assert.equal(run(ix, blockHashes([...tokens(1, 23), ...tokens(1, 24)], BS, null)), 2);
  assert.equal(ix.stat(SLOT, Stat.Fallbacks + 4), 0, 'it was not live when the restart was found: no second fallback counted');
});

test('an events index too small for a replica\'s blocks: that replica falls back (overflow) until its cache is cleared', () => {
  const ix = new EventsIndex({ entries: 8, slots: 4 }); // 64 entries
  const s = new ReplicaStream(ix, { slot: SLOT, blockSize: BS, silenceTicks: 3, tickMs: TICK, capacityBlocks: () => 1000, nowMs: () => clock }, { requestReplay: () => {} });
  s.onConnected();
  s.onReplayEnd(true);
  const n = 100;
  s.onLive(0, batch(stored(Array.from({ length: n }, (_, i) => 1000n + BigInt(i)), null, tokens(n, 25))));
  assert.equal(s.live, false);
  assert.equal(ix.reason(SLOT), 'overflow');
  s.onLive(1, batch({ type: 'AllBlocksCleared' }));
  assert.equal(s.live, true, 'an empty cache is known exactly again');
  assert.equal(ix.entries(), 0);
});
