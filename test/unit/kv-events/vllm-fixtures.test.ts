// The gateway's KV-event decoder and stream against payloads it did not write: test/fixtures/kv-events/*.msgpack
// were written by make_fixtures.py (Python, python3-msgpack) from vLLM's msgspec Struct definitions, in current
// vLLM's form (map EventBatch, tagged map events) and the positional form of earlier builds, with int, byte and
// negative i64 hashes, an unknown event type, a hybrid model's KV-cache groups, and LoRA blocks named only by id.
// expected.json says what each payload means; no Python runs here.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { before, test } from 'node:test';
import { blockHashes, initBlockHasher } from '../../../src/tokenize/block-hash.ts';
import { EventsIndex, Stat } from '../../../src/registry/kv-events/events-index.ts';
import { ReplicaStream } from '../../../src/registry/kv-events/replica-stream.ts';
import { decodeBatch, type KvEvent } from '../../../src/registry/kv-events/wire.ts';

before(() => initBlockHasher());

const DIR = new URL('../../fixtures/kv-events/', import.meta.url);
const BS = 16;
const SLOT = 1;

interface ExpectedEvent {
  type: string;
  block_hashes?: string[];
  parent_block_hash?: string | null;
  token_ids?: number[];
  block_size?: number;
  lora_id?: number | null;
  lora_name?: string | null;
  medium?: string | null;
  extra_keys?: unknown[][] | null;
  group_idx?: number | null;
  kv_cache_spec_kind?: string | null;
  kv_cache_spec_sliding_window?: number | null;
}
interface Expected { form: 'map' | 'positional'; ts: number; data_parallel_rank: number | null; events: ExpectedEvent[]; note: string }

const expected = JSON.parse(readFileSync(new URL('expected.json', DIR), 'utf8')) as Record<string, Expected>;
const payload = (name: string): Uint8Array => new Uint8Array(readFileSync(new URL(`${name}.msgpack`, DIR)));

/** What the decoder should give for one event of expected.json. */
function meant(e: ExpectedEvent): KvEvent {
  const hashes = (e.block_hashes ?? []).map(BigInt);
  if (e.type === 'AllBlocksCleared') return { type: 'AllBlocksCleared' };
  if (e.type === 'BlockRemoved') return { type: 'BlockRemoved', blockHashes: hashes, medium: e.medium ?? null, groupIdx: e.group_idx ?? null };
  return {
    type: 'BlockStored', blockHashes: hashes, parentBlockHash: e.parent_block_hash == null ? null : BigInt(e.parent_block_hash),
    tokenIds: e.token_ids!, blockSize: e.block_size!, loraId: e.lora_id ?? null, loraName: e.lora_name ?? null, medium: e.medium ?? null,
    extraKeys: e.extra_keys ?? null, groupIdx: e.group_idx ?? null, kvCacheSpecKind: e.kv_cache_spec_kind ?? null,
    kvCacheSpecSlidingWindow: e.kv_cache_spec_sliding_window ?? null,
  };
}

test('every fixture decodes to what vLLM meant, in both forms: int, byte and negative i64 hashes, unknown tags skipped', () => {
  const names = Object.keys(expected);
  assert.ok(names.length >= 13);
  for (const name of names) {
    const x = expected[name]!;
    const bytes = payload(name);
    // The form, read off the bytes: a fixmap (0x80 | n) or a fixarray (0x90 | n) of the EventBatch's fields.
    const fields = x.data_parallel_rank === null ? 2 : 3;
    assert.equal(bytes[0], (x.form === 'map' ? 0x80 : 0x90) | fields, `${name}: the EventBatch is a ${x.form}`);
    const b = decodeBatch(bytes);
    assert.equal(b.ts, x.ts, name);
    assert.equal(b.dataParallelRank, x.data_parallel_rank, name);
    assert.deepEqual(b.events, x.events.map(meant), `${name}: ${x.note}`);
  }
});

test('current vLLM writes tagged map events with the tag first and None defaults left out; earlier builds, positional arrays', () => {
  const map = payload('stored-removed.map');
  const pos = payload('stored-removed.positional');
  // {"ts": float64, "events": [ {"type": "BlockStored", … : after the map header, "ts", a float64, "events", an array of 4 …
  const tagFirst = Buffer.from([0xa4, ...Buffer.from('type'), 0xab, ...Buffer.from('BlockStored')]);
  assert.ok(Buffer.from(map).indexOf(tagFirst) > 0, 'a map event: "type": "BlockStored"');
  assert.ok(!Buffer.from(map).includes('extra_keys'), 'omit_defaults: extra_keys (None) is not written');
  assert.ok(Buffer.from(map).includes('lora_name'), 'lora_name has no default: written even when None');
  assert.ok(Buffer.from(map).includes('kv_cache_spec_kind'));
  assert.ok(!Buffer.from(map).includes('kv_cache_spec_sliding_window'));
  assert.ok(!Buffer.from(pos).includes('block_hashes'), 'array_like: no field names');
  assert.equal(Buffer.from(pos).indexOf(Buffer.from([0xab, ...Buffer.from('BlockStored')])), 12, 'the tag opens the positional event');
  assert.equal(decodeBatch(map).events.length, 4);
  assert.deepEqual(decodeBatch(map), decodeBatch(pos), 'both forms mean the same');
});

function stream(loraIds: ReadonlyArray<readonly [number, string]> = []): { ix: EventsIndex; s: ReplicaStream } {
  const ix = new EventsIndex({ entries: 4096, slots: 4 });
  const s = new ReplicaStream(ix, {
    slot: SLOT, blockSize: BS, silenceTicks: 3, tickMs: 100, capacityBlocks: () => 1000, nowMs: () => 1_000_000, loraNames: new Map(loraIds),
  }, { requestReplay: () => {} });
  s.onConnected();
  s.onReplayEnd(true);
  return { ix, s };
}

function run(ix: EventsIndex, ours: Float64Array): number {
  const out = new Int32Array(1);
  ix.lookup(ours, [SLOT], out);
  return out[0]!;
}

const tokensOf = (name: string, i = 0): number[] => expected[name]!.events[i]!.token_ids!;

test('a hybrid model: a sliding-window removal leaves the full-attention group\'s blocks, whichever index that group has', () => {
  for (const name of ['hybrid-groups.map', 'hybrid-groups.positional']) {
    const { ix, s } = stream();
    s.onLive(0, payload(name));
    const ours = blockHashes(tokensOf(name), BS, null);
    assert.equal(run(ix, ours), 4, `${name}: group 1 (full_attention) still holds all 4 blocks after group 0 (sliding_window) dropped 2`);
    assert.equal(ix.stat(SLOT, Stat.Blocks), 4, 'one copy per block: the sliding-window group\'s copies are not counted');
  }
  const { ix, s } = stream();
  s.onLive(0, payload('hybrid-groups-evict-full.map'));
  assert.equal(run(ix, blockHashes(tokensOf('hybrid-groups-evict-full.map'), BS, null)), 2, 'the full-attention group\'s own eviction counts');
});

test('lora_id without lora_name: unmappable (no base-model hits) unless the pool maps the id to an adapter', () => {
  for (const name of ['lora-id-only.map', 'lora-id-only.positional']) {
    const t = tokensOf(name);
    const plain = stream();
    plain.s.onLive(0, payload(name));
    assert.equal(run(plain.ix, blockHashes(t, BS, null)), 0, `${name}: adapter blocks are not the base model's`);
    assert.equal(run(plain.ix, blockHashes(t, BS, 'sql-adapter')), 0);
    assert.equal(plain.ix.stat(SLOT, Stat.Unmapped), 2, 'counted as unmapped');
    const mapped = stream([[3, 'sql-adapter']]);
    mapped.s.onLive(0, payload(name));
    assert.equal(run(mapped.ix, blockHashes(t, BS, 'sql-adapter')), 2, `${name}: lora_ids {3: sql-adapter} keys them by the adapter`);
    assert.equal(run(mapped.ix, blockHashes(t, BS, null)), 0);
  }
  const named = stream();
  named.s.onLive(0, payload('lora-name.map'));
  assert.equal(run(named.ix, blockHashes(tokensOf('lora-name.map'), BS, 'sql-adapter')), 2, 'lora_name (and the name as extra key) needs no mapping');
});

test('the stream applies both forms and every hash encoding alike', () => {
  for (const form of ['map', 'positional']) {
    const { ix, s } = stream();
    const name = `stored-removed.${form}`;
    const t = [...tokensOf(name, 0), ...tokensOf(name, 1)];
    s.onLive(0, payload(name));
    assert.equal(ix.stat(SLOT, Stat.Events), 4);
    assert.equal(run(ix, blockHashes(t, BS, null)), 0, 'the batch ends with AllBlocksCleared');
    const bytes = stream();
    bytes.s.onLive(0, payload(`bytes-hashes.${form}`));
    assert.equal(run(bytes.ix, blockHashes(tokensOf(`bytes-hashes.${form}`), BS, null)), 1, `${form}: 32-byte hashes keyed by their low 8 bytes; block 1 removed by the same bytes`);
    const odd = stream();
    odd.s.onLive(0, payload(`unknown-tag.${form}`));
    assert.equal(odd.ix.stat(SLOT, Stat.Events), 2, `${form}: the unknown event is skipped, the stream goes on`);
    assert.equal(odd.s.live, true);
  }
  const old = stream();
  old.s.onLive(0, payload('negative-i64.positional'));
  assert.equal(old.ix.stat(SLOT, Stat.Blocks), 7, 'eight blocks of distinct hashes stored (−2^63 … 2^63 − 1), one removed');
  assert.equal(run(old.ix, blockHashes(tokensOf('negative-i64.positional'), BS, null)), 1, 'block 1 (hash −1, i.e. 2^64 − 1) removed: the run stops there');
});
