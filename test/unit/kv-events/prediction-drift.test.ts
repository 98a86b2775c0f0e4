// The events index checking itself, without sockets: prediction checks recorded as an acceptor records them,
// judged once per tick by the stream. A live stream whose predictions the replica does not confirm falls back
// (reason "drift") and is rebuilt from a replay from 0; it serves again only once its predictions agree.
import assert from 'node:assert/strict';
import { before, test } from 'node:test';
import { blockHashes, initBlockHasher } from '../../../src/tokenize/block-hash.ts';
import { EventsIndex, FALLBACK_REASONS, Stat } from '../../../src/registry/kv-events/events-index.ts';
import { DriftJudge, EVIDENCE_REQUESTS, PredictionChecks, WINDOW_TOKENS } from '../../../src/registry/kv-events/prediction-drift.ts';
import { ReplicaStream } from '../../../src/registry/kv-events/replica-stream.ts';
import { encodeBatch, type KvEvent } from '../../../src/registry/kv-events/wire.ts';

before(() => initBlockHasher());

const BS = 16;
const SLOT = 3;
const DRIFTS = Stat.Fallbacks + FALLBACK_REASONS.indexOf('drift');

function setup(): { ix: EventsIndex; s: ReplicaStream; checks: PredictionChecks; replays: number[] } {
  const ix = new EventsIndex({ entries: 4096, slots: 4 });
  const replays: number[] = [];
  const s = new ReplicaStream(ix, { slot: SLOT, blockSize: BS, silenceTicks: 3, tickMs: 100, capacityBlocks: () => 1000, nowMs: () => 1_000_000 },
    { requestReplay: (from) => replays.push(from) });
  s.onConnected();
  s.onReplayEnd(true);
  return { ix, s, checks: new PredictionChecks(ix), replays };
}

const tokens = (n: number, base: number): number[] => Array.from({ length: n * BS }, (_, i) => (base * 13 + i) % 100_000);
const stored = (hashes: bigint[], toks: number[]): KvEvent => ({
  type: 'BlockStored', blockHashes: hashes, parentBlockHash: null, tokenIds: toks, blockSize: BS, loraId: null, loraName: null, medium: 'GPU',
  extraKeys: null, groupIdx: 0, kvCacheSpecKind: 'full_attention', kvCacheSpecSlidingWindow: null,
});
const batch = (...events: KvEvent[]): Uint8Array => encodeBatch({ ts: 1000, events, dataParallelRank: 0 });

/** `n` answered requests, as an acceptor records them: `predicted` tokens predicted, `reported` reported, each. */
function answered(checks: PredictionChecks, n: number, predicted: number, reported: number): void {
  for (let i = 0; i < n; i++) {
    assert.equal(checks.checking(SLOT), true, 'requests dispatched now are checked');
    checks.record(SLOT, checks.epoch(SLOT), predicted, reported);
  }
}

test('predictions the replica confirms keep the stream live; precision is published per replica', () => {
  const { ix, s, checks } = setup();
  answered(checks, 12, 160, 160);
  answered(checks, 4, 160, 200); // reported more than predicted: not a contradiction
  s.checkPredictions();
  assert.equal(s.live, true);
  assert.equal(ix.stat(SLOT, Stat.Precision), 1);
});

test('a live stream below 0.7 falls back (drift), replays from 0, and serves again only when its predictions agree', () => {
  const { ix, s, checks, replays } = setup();
  const t = tokens(4, 1);
  s.onLive(0, batch(stored([11n, 12n, 13n, 14n], t)));
  answered(checks, 6, 160, 160);
  answered(checks, 6, 160, 16); // 6 × 16 + 6 × 160 confirmed of 12 × 160: 0.55
  s.checkPredictions();
  assert.equal(s.live, false);
  assert.equal(ix.reason(SLOT), 'drift');
  assert.equal(ix.stat(SLOT, DRIFTS), 1);
  assert.ok(Math.abs(ix.stat(SLOT, Stat.Precision) - 0.55) < 1e-9);
  assert.equal(replays[replays.length - 1], 0, 'the index is rebuilt from the replay buffer, from 0');
  const out = new Int32Array(1);
  ix.lookup(blockHashes(t, BS, null), [SLOT], out);
  assert.equal(out[0], 0, 'cleared until the replay answers');
  s.onReplay(0, batch(stored([11n, 12n, 13n, 14n], t)));
  s.onReplayEnd(true);
  assert.equal(s.live, false, 'rebuilt, but not trusted before its predictions agree');
  assert.equal(checks.checking(SLOT), true, 'still checked while held back');
  answered(checks, EVIDENCE_REQUESTS - 1, 160, 160);
  s.checkPredictions();
  assert.equal(s.live, false, 'not enough evidence yet');
  answered(checks, 1, 160, 152);
  s.checkPredictions();
  assert.equal(s.live, true, 'agrees again (0.99 >= 0.9): events serve');
  assert.equal(ix.stat(SLOT, DRIFTS), 1);
});

test('a request dispatched before the index was rebuilt is not evidence about the rebuilt index', () => {
  const { s, checks } = setup();
  const before = checks.epoch(SLOT);
  answered(checks, 12, 160, 0);
  s.checkPredictions();
  assert.equal(s.live, false);
  assert.notEqual(checks.epoch(SLOT), before);
  s.onReplayEnd(true);
  for (let i = 0; i < 12; i++) checks.record(SLOT, before, 160, 0); // dispatched against the old index, answered now
  answered(checks, 8, 160, 160);
  s.checkPredictions();
  assert.equal(s.live, true);
});

test('outside live and drift, predictions are not judged (a gap or restart is rebuilding the index)', () => {
  const { ix, s, checks } = setup();
  s.onDisconnected();
  assert.equal(checks.checking(SLOT), false, 'no checks recorded while broken');
  checks.record(SLOT, checks.epoch(SLOT), 160, 0);
  s.checkPredictions();
  assert.equal(ix.reason(SLOT), 'broken');
  assert.equal(ix.stat(SLOT, DRIFTS), 0);
});

test('the judge\'s window decays: old agreement does not hide a replica that stopped agreeing', () => {
  const j = new DriftJudge();
  j.add({ predicted: WINDOW_TOKENS * 4, confirmed: WINDOW_TOKENS * 4, requests: 1000 });
  assert.equal(j.verdict(true), 'undecided');
  for (let i = 0; i < 20 && j.verdict(true) !== 'drifted'; i++) j.add({ predicted: 4096, confirmed: 0, requests: 16 });
  assert.equal(j.verdict(true), 'drifted');
  assert.ok(j.precision() < 0.7);
});
