// vLLM's KV-event wire format (vllm/distributed/kv_events.py; docs/vllm-facts.md "KV events publisher"): the
// msgpack payload of one ZMQ message, an EventBatch of BlockStored / BlockRemoved / AllBlocksCleared, and the
// 8-byte big-endian sequence frame. The one module that imports @msgpack/msgpack (eslint.config.js).
// Thread: the kv-events worker (decode, per message) and the mock replica (encode, per engine step).
// Hot path of the subscriber: one decode per batch; hashes become u64 bigints, token ids stay numbers.
//
// Forms accepted (vLLM changed them over time; a consumer must take all of them):
//   EventBatch  a map {ts, events, data_parallel_rank} (current vLLM: a plain msgspec Struct)
//               or positional [ts, events, data_parallel_rank?] (earlier builds: array_like=True)
//   each event  a map with the tag first, {"type": "BlockStored", …} (current: tag=True, not array_like)
//               or positional ["BlockStored", block_hashes, parent_block_hash, token_ids, block_size, lora_id,
//               medium, lora_name, extra_keys, group_idx, kv_cache_spec_kind, kv_cache_spec_sliding_window]
//               (array_like with the tag first; omit_defaults drops the trailing defaults, and earlier builds
//               end after block_size, lora_id or medium)
//   a hash      an int (u64, or a negative i64 from builds where Python hash() leaked through: taken mod 2^64),
//               or raw bytes (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0: the low 64 bits read big-endian, which
//               is what the int form carries).
// An event of a type this decoder does not know is skipped. test/fixtures/kv-events/ holds payloads of every
// form written from vLLM's Struct definitions by a script that shares no code with this one.
// encodeBatch writes what current vLLM writes: the map EventBatch with tagged map events.
import { Decoder, Encoder } from '@msgpack/msgpack';

export interface BlockStored {
  readonly type: 'BlockStored';
  readonly blockHashes: readonly bigint[];
  readonly parentBlockHash: bigint | null;
  /** Every block's token ids, concatenated (blockHashes.length × blockSize of them). */
  readonly tokenIds: readonly number[];
  readonly blockSize: number;
  /** The adapter's int id (vLLM's lora_int_id; deprecated in favour of loraName), or null. */
  readonly loraId: number | null;
  readonly loraName: string | null;
  /** "GPU", "CPU" (offloading tiers), or null (older builds: GPU). */
  readonly medium: string | null;
  /** Per block: the extra hash keys (LoRA name, multimodal ids, cache_salt, …), or null when not sent. */
  readonly extraKeys: ReadonlyArray<readonly unknown[] | null> | null;
  /** KV-cache group of a hybrid model (null: the only group). */
  readonly groupIdx: number | null;
  /** The group's KVCacheSpecKind ("full_attention", "sliding_window", "mamba", …; null from builds without it). */
  readonly kvCacheSpecKind: string | null;
  readonly kvCacheSpecSlidingWindow: number | null;
}

export interface BlockRemoved {
  readonly type: 'BlockRemoved';
  readonly blockHashes: readonly bigint[];
  readonly medium: string | null;
  readonly groupIdx: number | null;
}

export interface AllBlocksCleared {
  readonly type: 'AllBlocksCleared';
}

export type KvEvent = BlockStored | BlockRemoved | AllBlocksCleared;

export interface KvEventBatch {
  /** The engine's time.time() when it built the batch, seconds since the epoch. */
  readonly ts: number;
  readonly events: readonly KvEvent[];
  readonly dataParallelRank: number | null;
}

/** A payload that is not an EventBatch vLLM could have sent. */
export class WireError extends Error {}

/** The replay socket's end-of-replay marker: seq −1 as 8 signed big-endian bytes, with an empty payload. */
export const END_SEQ = -1;

const decoder = new Decoder({ useBigInt64: true });
const encoder = new Encoder({ useBigInt64: true });
const U64 = (1n << 64n) - 1n;

/** The 8-byte big-endian frame of a sequence number (−1: the replay end marker). */
export function seqFrame(seq: number): Buffer {
  const b = Buffer.allocUnsafe(8);
  b.writeBigInt64BE(BigInt(seq));
  return b;
}

/** A sequence frame as a number (signed: −1 is the end marker); NaN when it is not 8 bytes. */
export function readSeq(frame: Uint8Array): number {
  if (frame.length !== 8) return Number.NaN;
  const view = new DataView(frame.buffer, frame.byteOffset, 8);
  return Number(view.getBigInt64(0));
}

/** A block hash off the wire as an unsigned 64-bit bigint. */
export function wireHash(v: unknown): bigint {
  if (typeof v === 'bigint') return v & U64;
  if (typeof v === 'number' && Number.isInteger(v)) return BigInt(v) & U64;
  if (v instanceof Uint8Array && v.length > 0) {
    let h = 0n;
    for (let i = Math.max(0, v.length - 8); i < v.length; i++) h = (h << 8n) | BigInt(v[i]!);
    return h;
  }
  throw new WireError(`block hash is neither an int nor bytes: ${typeof v}`);
}

function hashList(v: unknown, what: string): bigint[] {
  if (!Array.isArray(v)) throw new WireError(`${what}.block_hashes is not a list`);
  const out = new Array<bigint>(v.length);
  for (let i = 0; i < v.length; i++) out[i] = wireHash(v[i]);
  return out;
}

function optString(v: unknown): string | null {
  return typeof v === 'string' ? v : null;
}

function optInt(v: unknown): number | null {
  return typeof v === 'number' ? v : typeof v === 'bigint' ? Number(v) : null;
}

const STORED_FIELDS = [
  'block_hashes', 'parent_block_hash', 'token_ids', 'block_size', 'lora_id', 'medium', 'lora_name', 'extra_keys', 'group_idx',
  'kv_cache_spec_kind', 'kv_cache_spec_sliding_window',
] as const;
const REMOVED_FIELDS = ['block_hashes', 'medium', 'group_idx'] as const;

/** An event's fields by name, whichever form it came in. */
function fieldsOf(raw: unknown): { tag: string; get(name: string): unknown } {
  if (Array.isArray(raw)) {
    const tag = raw[0];
    if (typeof tag !== 'string') throw new WireError('positional event without a tag');
    const names: readonly string[] = tag === 'BlockStored' ? STORED_FIELDS : tag === 'BlockRemoved' ? REMOVED_FIELDS : [];
    return { tag, get: (name) => raw[names.indexOf(name) + 1] ?? null };
  }
  if (raw !== null && typeof raw === 'object') {
    const m = raw as Record<string, unknown>;
    if (typeof m.type !== 'string') throw new WireError('event map without a "type"');
    return { tag: m.type, get: (name) => m[name] ?? null };
  }
  throw new WireError('event is neither a list nor a map');
}

function decodeEvent(raw: unknown): KvEvent | null {
  const f = fieldsOf(raw);
  switch (f.tag) {
    case 'BlockStored': {
      const tokens = f.get('token_ids');
      const blockSize = optInt(f.get('block_size'));
      if (!Array.isArray(tokens)) throw new WireError('BlockStored.token_ids is not a list');
      if (blockSize === null || blockSize < 1) throw new WireError('BlockStored.block_size is not a positive int');
      const parent = f.get('parent_block_hash');
      const extra = f.get('extra_keys');
      return {
        type: 'BlockStored', blockHashes: hashList(f.get('block_hashes'), 'BlockStored'),
        parentBlockHash: parent === null ? null : wireHash(parent), tokenIds: tokens.map(Number), blockSize,
        loraId: optInt(f.get('lora_id')), loraName: optString(f.get('lora_name')), medium: optString(f.get('medium')),
        extraKeys: Array.isArray(extra) ? extra.map((k) => (Array.isArray(k) ? k : null)) : null,
        groupIdx: optInt(f.get('group_idx')), kvCacheSpecKind: optString(f.get('kv_cache_spec_kind')),
        kvCacheSpecSlidingWindow: optInt(f.get('kv_cache_spec_sliding_window')),
      };
    }
    case 'BlockRemoved':
      return { type: 'BlockRemoved', blockHashes: hashList(f.get('block_hashes'), 'BlockRemoved'), medium: optString(f.get('medium')), groupIdx: optInt(f.get('group_idx')) };
    case 'AllBlocksCleared':
      return { type: 'AllBlocksCleared' };
    default:
      return null; // an event type this gateway does not know: skipped, as msgspec consumers would reject only it
  }
}

/** Decodes one payload frame. Throws WireError (or msgpack's DecodeError) on anything else. */
export function decodeBatch(payload: Uint8Array): KvEventBatch {
  const raw: unknown = decoder.decode(payload);
  let ts: unknown;
  let events: unknown;
  let rank: unknown = null;
  if (Array.isArray(raw)) [ts, events, rank = null] = raw as unknown[];
  else if (raw !== null && typeof raw === 'object') ({ ts, events, data_parallel_rank: rank = null } = raw as Record<string, unknown>);
  else throw new WireError('EventBatch is neither a list nor a map');
  if (typeof ts !== 'number') throw new WireError('EventBatch.ts is not a number');
  if (!Array.isArray(events)) throw new WireError('EventBatch.events is not a list');
  const out: KvEvent[] = [];
  for (const e of events) {
    const ev = decodeEvent(e);
    if (ev !== null) out.push(ev);
  }
  return { ts, events: out, dataParallelRank: optInt(rank) };
}

/**
 * Encodes a batch as current vLLM does: a map {ts, events, data_parallel_rank} of tagged map events, with
 * msgspec's omit_defaults (a field whose default is None is left out when None; lora_id, medium and lora_name
 * have no default and are always written), fields in declaration order, the tag first.
 */
export function encodeBatch(batch: KvEventBatch): Uint8Array {
  const events = batch.events.map((e): Record<string, unknown> => {
    switch (e.type) {
      case 'BlockStored': {
        const m: Record<string, unknown> = {
          type: 'BlockStored', block_hashes: e.blockHashes, parent_block_hash: e.parentBlockHash, token_ids: e.tokenIds,
          block_size: e.blockSize, lora_id: e.loraId, medium: e.medium, lora_name: e.loraName,
        };
        if (e.extraKeys !== null) m.extra_keys = e.extraKeys;
        if (e.groupIdx !== null) m.group_idx = e.groupIdx;
        if (e.kvCacheSpecKind !== null) m.kv_cache_spec_kind = e.kvCacheSpecKind;
        if (e.kvCacheSpecSlidingWindow !== null) m.kv_cache_spec_sliding_window = e.kvCacheSpecSlidingWindow;
        return m;
      }
      case 'BlockRemoved': {
        const m: Record<string, unknown> = { type: 'BlockRemoved', block_hashes: e.blockHashes, medium: e.medium };
        if (e.groupIdx !== null) m.group_idx = e.groupIdx;
        return m;
      }
      case 'AllBlocksCleared':
        return { type: 'AllBlocksCleared' };
    }
  });
  const out: Record<string, unknown> = { ts: batch.ts, events };
  if (batch.dataParallelRank !== null) out.data_parallel_rank = batch.dataParallelRank;
  return encoder.encode(out);
}
