// The mock replica's KV events on the wire, decoded with @msgpack/msgpack directly (not the gateway's decoder)
// against current vLLM's layout (vllm/distributed/kv_events.py): PUB multipart (topic, seq as 8 big-endian
// bytes, payload), payload = {ts, events, data_parallel_rank} (EventBatch is a plain msgspec Struct: a map) of
// tagged map events; BlockStored with int block hashes, the parent chain, every block's token ids and its
// KV-cache group (0, full_attention); BlockRemoved when a cached block is evicted; the replay ROUTER at the
// next port answering (empty, start seq) with (empty, seq, payload)… then seq −1 and an empty payload.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { decode } from '@msgpack/msgpack';
import { connectReplayDealer, connectSubscriber, type Subscriber } from '../../../src/registry/kv-events/zmq.ts';
import { startMockReplica, type MockReplica } from '../../helpers/mock-replicas.ts';
import { freeKvEventsEndpoint } from '../../helpers/port-pair.ts';

let replica: MockReplica;
let endpoint: string;
let sub: Subscriber;
/** Every hash a BlockStored announced, over both tests. */
const announced = new Set<bigint>();

before(async () => {
  endpoint = await freeKvEventsEndpoint();
  // 12 blocks (11 usable): a second long prompt must evict the first one's cached blocks.
  replica = await startMockReplica({ profile: 'tiny', numGpuBlocks: 12, timeScale: 0.1, kvEvents: endpoint });
  sub = connectSubscriber(endpoint, { topic: '', heartbeatIntervalMs: 0, heartbeatTimeoutMs: 0, reconnectIntervalMs: 50 });
  await new Promise((r) => setTimeout(r, 200)); // PUB drops what is sent before the SUB's subscription arrives
});
after(async () => {
  sub.close();
  await replica.close();
});

interface Frames { topic: Buffer; seq: bigint; batch: Record<string, unknown> }

async function nextMessage(): Promise<Frames> {
  const frames = await sub.receive();
  assert.equal(frames.length, 3, 'topic, seq, payload');
  const [topic, seq, payload] = frames as [Buffer, Buffer, Buffer];
  assert.equal(seq.length, 8);
  return { topic, seq: seq.readBigInt64BE(), batch: decode(payload, { useBigInt64: true }) as Record<string, unknown> };
}

async function completion(prompt: string, maxTokens: number): Promise<{ cached: number }> {
  const res = await fetch(`${replica.url}/v1/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ prompt, max_tokens: maxTokens, ignore_eos: true }),
  });
  assert.equal(res.status, 200);
  const body = await res.json() as { usage: { prompt_tokens_details: { cached_tokens: number } | null } };
  return { cached: body.usage.prompt_tokens_details?.cached_tokens ?? 0 };
}

async function tokenize(prompt: string): Promise<number[]> {
  const res = await fetch(`${replica.url}/tokenize`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ prompt }) });
  return (await res.json() as { tokens: number[] }).tokens;
}

const words = (n: number, salt: string): string => Array.from({ length: n }, (_, i) => `${salt}${i}`).join(' ');

test('BlockStored batches: vLLM framing, map-encoded events, int hashes chained by parent, the blocks\' token ids', async () => {
  const prompt = words(40, 'alpha'); // > 3 blocks of 16 tokens
  const ids = await tokenize(prompt);
  await completion(prompt, 4);
  const stored: Array<Record<string, unknown>> = [];
  let expectSeq = 0n;
  while (stored.reduce((n, e) => n + (e.block_hashes as unknown[]).length, 0) < Math.floor((ids.length + 3) / 16)) {
    const m = await nextMessage();
    assert.equal(m.topic.length, 0, "vLLM's default topic is empty");
    assert.equal(m.seq, expectSeq++, 'sequence numbers count up from 0');
    assert.deepEqual(Object.keys(m.batch), ['ts', 'events', 'data_parallel_rank'], 'EventBatch is a map, in field order');
    const { ts, events, data_parallel_rank: rank } = m.batch as { ts: number; events: Array<Record<string, unknown>>; data_parallel_rank: number };
    assert.equal(typeof ts, 'number');
    assert.ok(Math.abs(ts - Date.now() / 1000) < 60, 'ts is time.time(): seconds since the epoch');
    assert.equal(rank, 0);
    for (const e of events) {
      assert.equal(e.type, 'BlockStored', 'no eviction yet');
      assert.deepEqual(Object.keys(e), ['type', 'block_hashes', 'parent_block_hash', 'token_ids', 'block_size', 'lora_id', 'medium', 'lora_name', 'group_idx', 'kv_cache_spec_kind'],
        'map-encoded with the tag first; None-default fields omitted, fields without a default always present');
      assert.equal(e.group_idx, 0);
      assert.equal(e.kv_cache_spec_kind, 'full_attention');
      assert.equal(e.lora_id, null, 'the base model');
      assert.equal(e.block_size, 16);
      assert.equal(e.medium, 'GPU');
      assert.equal(e.lora_name, null);
      stored.push(e);
    }
  }
  const hashes = stored.flatMap((e) => e.block_hashes as bigint[]);
  for (const h of hashes) announced.add(h);
  for (const h of hashes) assert.ok(typeof h === 'bigint' && h >= 0n && h < 1n << 64n, 'an unsigned 64-bit int');
  assert.equal(stored[0]!.parent_block_hash, null, 'block 0 has no parent');
  for (let i = 1; i < stored.length; i++) {
    const prev = stored[i - 1]!.block_hashes as bigint[];
    assert.equal(stored[i]!.parent_block_hash, prev[prev.length - 1], 'each event chains from the block before its first');
  }
  const tokens = stored.flatMap((e) => e.token_ids as number[]);
  assert.equal(tokens.length, 16 * hashes.length, 'block_size token ids per block, concatenated');
  assert.deepEqual(tokens.slice(0, Math.min(tokens.length, Math.floor(ids.length / 16) * 16)), ids.slice(0, Math.floor(ids.length / 16) * 16),
    "the prompt's blocks carry the prompt's token ids");
});

test('evicting cached blocks publishes BlockRemoved with the hashes BlockStored announced; replay returns the buffered range then seq -1', async () => {
  const removed: bigint[] = [];
  let lastSeq = -1n;
  await completion(words(40, 'beta'), 4);
  await completion(words(40, 'gamma'), 4);
  await completion(words(40, 'delta'), 4);
  const deadline = Date.now() + 20_000;
  while (removed.length === 0 && Date.now() < deadline) {
    const m = await Promise.race([nextMessage(), new Promise<null>((r) => setTimeout(() => r(null), 2000))]);
    if (m === null) break;
    lastSeq = m.seq;
    for (const e of m.batch.events as Array<Record<string, unknown>>) {
      if (e.type === 'BlockStored') for (const h of e.block_hashes as bigint[]) announced.add(h);
      if (e.type === 'BlockRemoved') {
        assert.deepEqual(Object.keys(e), ['type', 'block_hashes', 'medium', 'group_idx']);
        removed.push(...(e.block_hashes as bigint[]));
      }
    }
  }
  assert.ok(removed.length > 0, '11 usable blocks cannot hold three 3-block prompts and their replies');

  const dealer = connectReplayDealer(endpoint.replace(/:(\d+)$/, (_, p: string) => `:${Number(p) + 1}`), 50);
  try {
    const start = Buffer.alloc(8);
    start.writeBigInt64BE(1n);
    await dealer.send([Buffer.alloc(0), start]);
    const seqs: bigint[] = [];
    for (;;) {
      const frames = await dealer.receive();
      assert.equal(frames.length, 3, 'empty delimiter, seq, payload');
      assert.equal(frames[0]!.length, 0);
      const seq = frames[1]!.readBigInt64BE();
      if (seq === -1n) {
        assert.equal(frames[2]!.length, 0, 'the end marker has an empty payload');
        break;
      }
      seqs.push(seq);
      assert.ok(Array.isArray((decode(frames[2]!, { useBigInt64: true }) as { events: unknown }).events));
    }
    assert.equal(seqs[0], 1n, 'replay starts at the requested sequence number');
    assert.ok(seqs[seqs.length - 1]! >= lastSeq, 'and runs to the newest batch');
    for (let i = 1; i < seqs.length; i++) assert.equal(seqs[i], seqs[i - 1]! + 1n);
  } finally {
    dealer.close();
  }
  for (const h of removed) assert.ok(announced.has(h), 'only announced blocks are removed');
});
