// The mock replica's KV-event publisher (`--kv-events tcp://HOST:PORT`), as vLLM's ZmqEventPublisher: a PUB
// socket sending (topic, seq as 8 big-endian bytes, msgpack EventBatch) per engine step that changed the
// prefix cache, and a ROUTER at the next port answering replay requests from its buffer of recent batches.
// The payload is current vLLM's: a map EventBatch of tagged map events (wire.ts encodeBatch), each
// BlockStored of the one full-attention KV-cache group (group_idx 0, kv_cache_spec_kind "full_attention")
// with the adapter's int id (in the order adapters were first used, from 1, as vLLM numbers lora_int_id) and
// its name.
// Thread: main (mock process). Per cached or evicted block: one bigint mix and an array push; per step: one
// msgpack encode and one send.
//
// Block hashes on the wire are not the mock's cache keys (the gateway's own chained xxhash64 values): each is
// a 64-bit mix of the key with a random per-process seed, as vLLM's hashes depend on its per-process
// NONE_HASH. A subscriber therefore has to rebuild its own keys from the token ids and parent chain each
// BlockStored carries, exactly as it must against a real vLLM.
import { randomBytes } from 'node:crypto';
import { encodeBatch, seqFrame, type KvEvent } from '../../../src/registry/kv-events/wire.ts';
import { bindPublisher, bindReplayRouter, replayEndpointOf, type Publisher, type Router } from '../../../src/registry/kv-events/zmq.ts';
import type { EngineBlockEvents } from '../engine/types.ts';

/** vLLM's KVEventsConfig.buffer_steps: batches kept for replay. */
const BUFFER_STEPS = 10_000;
/**
 * ZeroMQ closes a socket's listener on its I/O thread after close() returns, so the same port bound again at
 * once (a mock restarted on its endpoint, the publisher stopped and started) can still be taken for a moment.
 * A restarted vLLM is a new process binding after the old one exited; this waits as that would, up to 2 s.
 */
const BIND_RETRY_MS = 2000;
const BIND_RETRY_EVERY_MS = 20;

async function bindWhenFree<T>(bind: () => Promise<T>): Promise<T> {
  const deadline = performance.now() + BIND_RETRY_MS;
  for (;;) {
    try {
      return await bind();
    } catch (err) {
      const inUse = (err as { code?: unknown }).code === 'EADDRINUSE' || /address already in use/i.test((err as Error).message);
      if (!inUse || performance.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, BIND_RETRY_EVERY_MS));
    }
  }
}
const MASK64 = (1n << 64n) - 1n;

/** splitmix64's finaliser: a bijection on 64-bit values. */
function mix64(x: bigint): bigint {
  x = ((x ^ (x >> 30n)) * 0xbf58476d1ce4e5b9n) & MASK64;
  x = ((x ^ (x >> 27n)) * 0x94d049bb133111ebn) & MASK64;
  return x ^ (x >> 31n);
}

interface PendingStored {
  type: 'BlockStored';
  blockHashes: bigint[];
  parentBlockHash: bigint | null;
  tokenIds: number[];
  blockSize: number;
  loraId: number | null;
  loraName: string | null;
  medium: string;
  extraKeys: null;
  groupIdx: number;
  kvCacheSpecKind: string;
  kvCacheSpecSlidingWindow: null;
  /** The mock's key of the last block, to extend the event with the next block of the same chain. */
  lastKey: number;
}

/** The mock's one KV-cache group: a dense model's single full-attention group. */
const GROUP = 0;
const GROUP_KIND = 'full_attention';

export class KvEventPublisher implements EngineBlockEvents {
  readonly endpoint: string;
  readonly replayEndpoint: string;
  private readonly blockSize: number;
  private readonly topic: Buffer;
  private readonly seed: bigint;
  private pub: Publisher | null = null;
  private router: Router | null = null;
  private pending: Array<KvEvent | PendingStored> = [];
  /** The last pending event when it is a BlockStored / BlockRemoved that the next block may extend. */
  private openStored: PendingStored | null = null;
  private openRemoved: { type: 'BlockRemoved'; blockHashes: bigint[]; medium: string; groupIdx: number } | null = null;
  /** Adapter name → the int id vLLM would give it (lora_int_id: 1, 2, … in load order). */
  private readonly loraIds = new Map<string, number>();
  private flushQueued = false;
  private nextSeq = 0;
  private readonly buffer: Array<{ seq: number; payload: Uint8Array }> = [];
  private sending: Promise<void> = Promise.resolve();
  /** Batches still to withhold from the PUB socket (the dropped-range test hook). */
  skip = 0;
  /**
   * Test hook: published batches leave out their BlockRemoved events, so a subscriber goes on believing the
   * engine holds blocks it evicted; the replay buffer keeps the whole batches (a replay tells the truth).
   */
  withholdRemoved = false;
  /** Batches built so far (published or withheld). */
  get batches(): number {
    return this.nextSeq;
  }

  private constructor(endpoint: string, blockSize: number, topic: string) {
    this.endpoint = endpoint;
    this.replayEndpoint = replayEndpointOf(endpoint);
    this.blockSize = blockSize;
    this.topic = Buffer.from(topic, 'utf8');
    this.seed = randomBytes(8).readBigUInt64BE();
  }

  /** Binds the PUB socket at `endpoint` and the replay ROUTER at the next port. */
  static async start(endpoint: string, blockSize: number, topic = ''): Promise<KvEventPublisher> {
    const p = new KvEventPublisher(endpoint, blockSize, topic);
    await p.open();
    return p;
  }

  /** The hash this engine reports for the mock's cache key `key`. */
  wireHash(key: number): bigint {
    return mix64(BigInt(key) ^ this.seed);
  }

  /** The sockets are bound (false after close() until open()). */
  get publishing(): boolean {
    return this.pub !== null;
  }

  /** (Re)binds both sockets; batches built while closed are in the replay buffer. */
  async open(): Promise<void> {
    if (this.pub !== null) return;
    this.pub = await bindWhenFree(() => bindPublisher(this.endpoint));
    this.router = await bindWhenFree(() => bindReplayRouter(this.replayEndpoint));
    void this.serveReplay(this.router);
  }

  /** Closes both sockets, as a publisher process that died would; the engine keeps numbering batches. */
  async close(): Promise<void> {
    const pub = this.pub;
    const router = this.router;
    this.pub = null;
    this.router = null;
    await this.sending;
    pub?.close();
    router?.close();
  }

  stored(hash: number, parentHash: number | null, tokens: ArrayLike<number> | null, index: number, adapter: string | null): void {
    const bs = this.blockSize;
    let ev = this.openStored;
    if (ev === null || ev.lastKey !== parentHash || ev.loraName !== adapter) {
      let loraId: number | null = null;
      if (adapter !== null) {
        loraId = this.loraIds.get(adapter) ?? this.loraIds.size + 1;
        this.loraIds.set(adapter, loraId);
      }
      ev = {
        type: 'BlockStored', blockHashes: [], parentBlockHash: parentHash === null ? null : this.wireHash(parentHash), tokenIds: [],
        blockSize: bs, loraId, loraName: adapter, medium: 'GPU', extraKeys: null, groupIdx: GROUP, kvCacheSpecKind: GROUP_KIND,
        kvCacheSpecSlidingWindow: null, lastKey: hash,
      };
      this.pending.push(ev);
      this.openStored = ev;
      this.openRemoved = null;
    }
    ev.blockHashes.push(this.wireHash(hash));
    ev.lastKey = hash;
    if (tokens !== null) for (let t = index * bs; t < (index + 1) * bs; t++) ev.tokenIds.push(tokens[t] ?? 0);
    this.queueFlush();
  }

  removed(hash: number): void {
    this.openStored = null;
    let ev = this.openRemoved;
    if (ev === null) {
      ev = { type: 'BlockRemoved', blockHashes: [], medium: 'GPU', groupIdx: GROUP };
      this.pending.push(ev);
      this.openRemoved = ev;
    }
    ev.blockHashes.push(this.wireHash(hash));
    this.queueFlush();
  }

  /** The whole prefix cache was dropped (vLLM's reset_prefix_cache). */
  cleared(): void {
    this.openStored = null;
    this.openRemoved = null;
    this.pending.push({ type: 'AllBlocksCleared' });
    this.queueFlush();
  }

  /**
   * One batch per engine step: the events a step produces are all queued synchronously inside it (its
   * allocations evict, its scheduled tokens fill blocks), so a microtask after the first one sees them all.
   */
  private queueFlush(): void {
    if (this.flushQueued) return;
    this.flushQueued = true;
    queueMicrotask(this.flush);
  }

  private readonly flush = (): void => {
    this.flushQueued = false;
    if (this.pending.length === 0) return;
    const events = this.pending.map((e): KvEvent => {
      if ('lastKey' in e) {
        const { lastKey: _, ...wire } = e;
        return wire;
      }
      return e;
    });
    this.pending = [];
    this.openStored = null;
    this.openRemoved = null;
    const seq = this.nextSeq++;
    const payload = encodeBatch({ ts: Date.now() / 1000, events, dataParallelRank: 0 });
    this.buffer.push({ seq, payload });
    if (this.buffer.length > BUFFER_STEPS) this.buffer.shift();
    if (this.skip > 0) {
      this.skip--;
      return;
    }
    const pub = this.pub;
    if (pub === null) return;
    const live = this.withholdRemoved && events.some((e) => e.type === 'BlockRemoved')
      ? encodeBatch({ ts: Date.now() / 1000, events: events.filter((e) => e.type !== 'BlockRemoved'), dataParallelRank: 0 })
      : payload;
    const frames = [this.topic, seqFrame(seq), live];
    // One send at a time, in sequence order (a ZeroMQ socket takes one pending send); PUB never blocks, it
    // drops at the high-water mark as vLLM's does.
    this.sending = this.sending.then(() => pub.send(frames)).catch(() => {});
  };

  /** Replay requests: (identity, empty, start seq) → (identity, empty, seq, payload) per buffered batch ≥ start, then seq −1. */
  private async serveReplay(router: Router): Promise<void> {
    try {
      for await (const frames of router) {
        if (frames.length !== 3) continue;
        const [id, , start] = frames as [Buffer, Buffer, Buffer];
        if (start.length !== 8) continue;
        const from = Number(start.readBigUInt64BE());
        for (const b of this.buffer) if (b.seq >= from) await router.send([id, Buffer.alloc(0), seqFrame(b.seq), b.payload]);
        await router.send([id, Buffer.alloc(0), seqFrame(-1), Buffer.alloc(0)]);
      }
    } catch {
      // the socket was closed (publisher stopped): the loop ends with it
    }
  }
}
