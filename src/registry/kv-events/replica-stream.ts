// One replica's KV-event stream, as the subscriber applies it: sequence tracking, replay of gaps, restarts,
// silence, and the translation of the engine's block hashes into the gateway's own, which the exact index
// (events-index.ts) is keyed by. No I/O: the ZeroMQ sockets (subscriber.ts) feed it and carry out its replay
// requests, so every transition is testable with plain calls.
// Thread: the kv-events worker. Per batch: one msgpack decode, one xxhash64 per stored block (the gateway's
// block hash), one Map operation and one index write per block stored or removed.
//
// Hash mapping. vLLM's block hashes (sha256 / xxhash / cbor variants, seeded per process by NONE_HASH) cannot
// be recomputed here without the server's PYTHONHASHSEED, hash function and serialisation, and they change on
// restart. BlockStored carries what is needed instead: the blocks' token ids, the LoRA name and the parent
// block's hash. The gateway's hash of a block is blockHashes(its tokens, adapter, parent's gateway hash)
// (src/tokenize/block-hash.ts), and the parent's gateway hash is known from when the parent was stored, so
// the chain is rebuilt block by block. A block whose parent is unknown (stored before this subscriber joined
// and not replayed), whose block size differs from the pool's, or whose extra keys hold more than the LoRA
// name (multimodal ids, cache_salt: keys the gateway never computes) cannot be mapped; it is counted
// (`unmapped`) and left out, and so are its descendants.
import { blockHashes, ROOT_PARENT_HASH } from '../../tokenize/block-hash.ts';
import type { EventsIndex} from './events-index.ts';
import { FallbackReason, Stat, StreamState } from './events-index.ts';
import { decodeBatch, type BlockRemoved, type BlockStored, type KvEventBatch } from './wire.ts';

/** Carries out the stream's requests on the network. */
export interface StreamIo {
  /** Ask the replay socket for every buffered batch from `fromSeq`: answers arrive as onReplay(), then onReplayEnd(). */
  requestReplay(fromSeq: number): void;
}

export interface StreamOptions {
  slot: number;
  /** The pool's block size: what the gateway hashes with. */
  blockSize: number;
  /** Scrape intervals without a batch (while the engine computed KV) that make the stream silent. */
  silenceTicks: number;
  /** Blocks the engine holds (num_gpu_blocks), for the resync rule; until scraped, a default. */
  capacityBlocks: () => number;
  /** Date.now() (the clock of the replica table's scrape stamps; lag = receive time − the batch's ts). */
  nowMs: () => number;
  /** The scrape interval: silence is judged once per interval. */
  tickMs: number;
}

/** Live batches kept while a replay runs; past this the stream resyncs instead. */
const MAX_PENDING = 100_000;
/** Replays in a row without an answer before the history they would have given is called lost. */
const REPLAY_ATTEMPTS = 3;
/**
 * Misses (computed prompt tokens) without a batch that make a quiet stream silent. Not one block: vLLM
 * recomputes a fully cached prompt's last block (up to a block of misses per request) and the mock, unlike
 * vLLM, announces no duplicate copy of a block; 16 blocks of unexplained work is far above that noise and
 * a few milliseconds of prefill at production rates.
 */
const SILENCE_MISS_BLOCKS = 16;

/**
 * The engine's 64-bit hash as a Map key: the nearest double, i.e. its top 53 significant bits (collision odds
 * within one replica's cache ≈ n²/2⁵⁴), without the intermediate bigint a mask would allocate.
 */
function keyOf(h: bigint): number {
  return Number(h);
}

export class ReplicaStream {
  readonly slot: number;
  private readonly index: EventsIndex;
  private readonly o: StreamOptions;
  private readonly io: StreamIo;
  /** Engine hash key → the gateway's hash of that block. */
  private readonly gw = new Map<number, number>();
  /** Engine hash key → copies beyond the first (vLLM may cache one hash in several physical blocks). */
  private readonly extraCopies = new Map<number, number>();
  /** Next sequence number to apply. */
  private expected = 0;
  /** Live seqs in [dupFrom, expected) are copies of batches a replay already applied. */
  private dupFrom = 0;
  private replaying = false;
  /**
   * A reconnect's replay starts one batch back, at the last batch applied: the same bytes prove the publisher
   * is the process this stream followed; anything else (nothing, other bytes) is a new process.
   */
  private verifying = false;
  private lastPayload: Uint8Array | null = null;
  private pending: Array<{ seq: number; payload: Uint8Array }> = [];
  /** Blocks still to be stored before a resynced index is trusted again (0: not resyncing). */
  private resyncLeft = 0;
  private overflowed = false;
  /** The running replay's first sequence number, and how many replays in a row got no answer. */
  private replayFrom = 0;
  private failedReplays = 0;
  /** The running replay answers a stale request; replay again from 0 when it ends. */
  private needsFullReplay = false;
  private connected = false;
  /** When the last batch arrived (ms, Date.now()), and the silence rule's baseline scrape. */
  private lastBatchMs: number;
  private baselineMiss = Number.NaN;
  private baselineAtMs = Number.NEGATIVE_INFINITY;

  constructor(index: EventsIndex, o: StreamOptions, io: StreamIo) {
    this.index = index;
    this.o = o;
    this.io = io;
    this.slot = o.slot;
    this.lastBatchMs = o.nowMs();
    index.resetStats(o.slot);
    index.setState(o.slot, StreamState.Fallback);
    index.clearSlot(o.slot);
  }

  get live(): boolean {
    return this.index.isLive(this.slot);
  }

  /** The next sequence number this stream needs. */
  get nextSeq(): number {
    return this.expected;
  }

  /** The SUB socket connected (again): catch up from the replay buffer before trusting the live stream. */
  onConnected(): void {
    this.connected = true;
    if (!this.replaying) this.startReplay(this.expected, true);
  }

  /** The SUB socket lost its connection: the stream is broken until batches flow again. */
  onDisconnected(): void {
    this.connected = false;
    this.fallBack(FallbackReason.Broken);
  }

  /** The replica restarted (registry): its cache is empty and its sequence starts again at 0. */
  onRestart(): void {
    this.clearAll();
    this.expected = 0;
    this.dupFrom = 0;
    this.lastPayload = null;
    this.pending = [];
    this.fallBack(FallbackReason.Restart);
    if (this.connected && !this.replaying) this.startReplay(0);
  }

  /** A batch from the PUB socket. */
  onLive(seq: number, payload: Uint8Array): void {
    this.connected = true;
    if (this.replaying) {
      this.keepPending(seq, payload);
      return;
    }
    if (seq === this.expected) {
      this.dupFrom = seq + 1;
      this.apply(seq, payload, false);
      this.goLiveIfReady();
    } else if (seq > this.expected) {
      this.index.addStat(this.slot, Stat.Gaps);
      this.keepPending(seq, payload);
      this.startReplay(this.expected);
    } else if (seq >= this.dupFrom) {
      // already applied through a replay
    } else {
      // A sequence that went backwards: a new publisher process (vLLM counts from 0 per process).
      this.restarted();
      this.needsFullReplay = false;
      if (seq === 0) {
        this.apply(seq, payload, false);
        this.goLiveIfReady();
      } else {
        this.keepPending(seq, payload);
        this.startReplay(0);
      }
    }
  }

  /** One batch of a replay answer. */
  onReplay(seq: number, payload: Uint8Array): void {
    if (this.verifying) {
      this.verifying = false;
      if (seq === this.expected - 1 && this.lastPayload !== null && Buffer.from(payload).equals(this.lastPayload)) return;
      this.restarted();
    }
    if (this.needsFullReplay) return; // this answer is the new process's tail: replayed from 0 next
    if (seq < this.expected) return;
    if (seq > this.expected) this.resync(seq); // the buffer no longer reaches back to what we need
    this.apply(seq, payload, true);
    this.index.addStat(this.slot, Stat.Replayed);
  }

  /** The replay ended (`ok`: its end marker came; false: it timed out or the socket failed). */
  onReplayEnd(ok: boolean): void {
    if (!this.replaying) return;
    this.replaying = false;
    if (!ok) {
      // No answer: no evidence about what was missed. The pending live batches prove continuity when they
      // start where this stream stands; otherwise ask again, and after REPLAY_ATTEMPTS give the history up.
      const first = this.pending.length > 0 ? Math.min(...this.pending.map((p) => p.seq)) : -1;
      if (first !== this.expected && ++this.failedReplays < REPLAY_ATTEMPTS) {
        this.startReplay(this.replayFrom, this.verifying);
        return;
      }
      this.verifying = false;
      this.needsFullReplay = false;
      if (first !== this.expected) this.resync(first >= 0 ? first : this.expected);
    }
    this.failedReplays = 0;
    if (this.verifying) {
      // The publisher no longer has the batch this stream applied last: a new process, or a buffer that
      // rotated past it. Either way the state before is unknown: start over from 0.
      this.verifying = false;
      this.restarted();
      this.needsFullReplay = false;
      this.startReplay(0);
      return;
    }
    if (this.needsFullReplay) {
      this.needsFullReplay = false;
      this.startReplay(0);
      return;
    }
    const pending = this.pending.sort((a, b) => a.seq - b.seq);
    this.pending = [];
    for (const p of pending) {
      if (p.seq < this.expected) continue;
      if (p.seq > this.expected) this.resync(p.seq);
      this.apply(p.seq, p.payload, false);
    }
    this.goLiveIfReady();
  }

  /**
   * Once per scrape interval, with the replica's scraped prefix-cache misses (queries − hits: prompt tokens the
   * engine computed; NaN when unknown) and when that scrape was taken. Silent = no batch for silenceTicks
   * intervals while the misses grew by SILENCE_MISS_BLOCKS blocks since a scrape taken at least one interval
   * after the last batch (so the work that batch reported is already in the baseline). vLLM publishes
   * nothing while idle and sends no heartbeat of its own, so quiet alone is no evidence; computed KV without
   * a BlockStored is.
   */
  tick(missTokens: number, scrapedAtMs: number, nowMs: number): void {
    if (Number.isNaN(missTokens)) return;
    const tickMs = this.o.tickMs;
    if (this.baselineAtMs < this.lastBatchMs + tickMs) {
      if (scrapedAtMs >= this.lastBatchMs + tickMs) {
        this.baselineMiss = missTokens;
        this.baselineAtMs = scrapedAtMs;
      }
      return;
    }
    if (this.live && nowMs - this.lastBatchMs >= this.o.silenceTicks * tickMs && missTokens - this.baselineMiss >= SILENCE_MISS_BLOCKS * this.o.blockSize) {
      this.fallBack(FallbackReason.Silent);
    }
  }

  /** Forget everything (the slot left, or is being reassigned). */
  close(): void {
    this.clearAll();
    this.index.setState(this.slot, StreamState.Off);
  }

  private keepPending(seq: number, payload: Uint8Array): void {
    if (this.pending.length >= MAX_PENDING) this.pending.shift();
    this.pending.push({ seq, payload });
  }

  /** `verify`: after a reconnect, when the publisher may be another process (a gap on a live stream is not). */
  private startReplay(from: number, verify = false): void {
    this.replaying = true;
    this.replayFrom = from;
    this.dupFrom = from;
    this.verifying = verify && from > 0 && this.lastPayload !== null;
    this.index.addStat(this.slot, Stat.Replays);
    this.io.requestReplay(this.verifying ? from - 1 : from);
  }

  /** The publisher is a new process: its cache started empty and its sequence at 0; replay it from there. */
  private restarted(): void {
    this.clearAll();
    this.expected = 0;
    this.dupFrom = 0;
    this.lastPayload = null;
    this.needsFullReplay = true;
    this.fallBack(FallbackReason.Restart);
  }

  /** History before `seq` is lost: start over from it, and serve approximate until the cache turned over. */
  private resync(seq: number): void {
    this.clearAll();
    this.expected = seq;
    this.dupFrom = seq;
    this.resyncLeft = Math.max(1, this.o.capacityBlocks());
    this.fallBack(FallbackReason.Gap);
  }

  private fallBack(reason: number): void {
    if (this.index.isLive(this.slot)) this.index.addStat(this.slot, Stat.Fallbacks + reason - 1);
    this.index.setState(this.slot, StreamState.Fallback, reason);
  }

  private goLiveIfReady(): void {
    if (this.replaying || this.resyncLeft > 0 || this.overflowed || this.index.isLive(this.slot)) return;
    // Work done while the stream was not live is not silence: the rule starts again from here.
    this.lastBatchMs = this.o.nowMs();
    this.index.setState(this.slot, StreamState.Live);
  }

  private clearAll(): void {
    const slot = this.slot;
    for (const g of this.gw.values()) this.index.remove(slot, g);
    this.gw.clear();
    this.extraCopies.clear();
    this.overflowed = false;
    this.index.setStat(slot, Stat.Blocks, 0);
  }

  private apply(seq: number, payload: Uint8Array, replayed: boolean): void {
    this.expected = seq + 1;
    // Replayed batches count too: the work they report is before the silence rule's next baseline.
    this.lastBatchMs = this.o.nowMs();
    this.lastPayload = Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength);
    let batch: KvEventBatch;
    try {
      batch = decodeBatch(payload);
    } catch {
      // What this batch changed is unknown: the index can no longer claim to be exact.
      this.resync(seq + 1);
      return;
    }
    const slot = this.slot;
    const index = this.index;
    index.addStat(slot, Stat.Batches);
    index.setStat(slot, Stat.LastSeq, seq);
    if (!replayed) index.setStat(slot, Stat.LagSeconds, Math.max(0, this.o.nowMs() / 1000 - batch.ts));
    for (const e of batch.events) {
      index.addStat(slot, Stat.Events);
      if (e.type === 'BlockStored') this.stored(e);
      else if (e.type === 'BlockRemoved') this.removed(e);
      else {
        this.clearAll();
        if (this.resyncLeft > 0) this.resyncLeft = 0; // an empty cache is known exactly
      }
    }
    index.setStat(slot, Stat.Blocks, this.gw.size);
  }

  private stored(e: BlockStored): void {
    const n = e.blockHashes.length;
    if (this.resyncLeft > 0) this.resyncLeft -= n;
    if ((e.medium !== null && e.medium !== 'GPU') || (e.groupIdx !== null && e.groupIdx !== 0)) return; // another tier or KV group
    const bs = this.o.blockSize;
    let mappable = n;
    if (e.blockSize !== bs || e.tokenIds.length !== n * bs) mappable = 0;
    let parent = ROOT_PARENT_HASH;
    if (mappable > 0 && e.parentBlockHash !== null) {
      const p = this.gw.get(keyOf(e.parentBlockHash));
      if (p === undefined) mappable = 0;
      else parent = p;
    }
    if (e.extraKeys !== null) {
      for (let i = 0; i < mappable; i++) {
        const k = e.extraKeys[i];
        if (k !== null && k !== undefined && !(k.length === 0 || (k.length === 1 && k[0] === e.loraName))) mappable = i;
      }
    }
    if (mappable < n) this.index.addStat(this.slot, Stat.Unmapped, n - mappable);
    if (mappable === 0) return;
    const tokens = mappable === n ? e.tokenIds : e.tokenIds.slice(0, mappable * bs);
    const ours = blockHashes(tokens, bs, e.loraName, parent);
    for (let i = 0; i < mappable; i++) {
      const key = keyOf(e.blockHashes[i]!);
      if (this.gw.has(key)) {
        this.extraCopies.set(key, (this.extraCopies.get(key) ?? 0) + 1);
        continue;
      }
      const g = ours[i]!;
      this.gw.set(key, g);
      if (!this.index.add(this.slot, g)) {
        this.overflowed = true;
        this.fallBack(FallbackReason.Overflow);
      }
    }
  }

  private removed(e: BlockRemoved): void {
    if (e.medium !== null && e.medium !== 'GPU') return;
    for (const h of e.blockHashes) {
      const key = keyOf(h);
      const extra = this.extraCopies.get(key);
      if (extra !== undefined) {
        if (extra > 1) this.extraCopies.set(key, extra - 1);
        else this.extraCopies.delete(key);
        continue;
      }
      const g = this.gw.get(key);
      if (g === undefined) continue;
      this.gw.delete(key);
      this.index.remove(this.slot, g);
    }
  }
}
