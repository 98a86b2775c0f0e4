// One replica's KV-event stream, as the subscriber applies it: sequence tracking, replay of gaps, restarts,
// silence, prediction drift, and the events applied to the exact index (events-index.ts). No I/O: the ZeroMQ sockets (subscriber.ts) feed it and carry out its replay
// requests, so every transition is testable with plain calls.
// Thread: the kv-events worker. Per batch: one msgpack decode, one xxhash64 per stored block (the gateway's
// block hash), one Map operation and one index write per block stored or removed.
//
// What an event means for the index (the hash mapping, KV-cache groups, LoRA ids) is block-map.ts's; when the
// events stop describing the cache (prediction-drift.ts), the stream falls back and rebuilds from a replay.
import { BlockMap } from './block-map.ts';
import type { EventsIndex } from './events-index.ts';
import { FallbackReason, Stat, StreamState } from './events-index.ts';
import { DriftJudge, PredictionChecks, type CheckSums } from './prediction-drift.ts';
import { decodeBatch, type KvEventBatch } from './wire.ts';

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
  /** vLLM lora_int_id → adapter name (the pool's `lora_ids`); empty when the pool maps none. */
  loraNames?: ReadonlyMap<number, string>;
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
const NO_LORA_NAMES: ReadonlyMap<number, string> = new Map();

export class ReplicaStream {
  readonly slot: number;
  private readonly index: EventsIndex;
  private readonly o: StreamOptions;
  private readonly io: StreamIo;
  private readonly map: BlockMap;
  private readonly checks: PredictionChecks;
  private readonly judge = new DriftJudge();
  private readonly sums: CheckSums = { predicted: 0, confirmed: 0, requests: 0 };
  /** The events disagreed with the replica's reports: approximate until they agree again. */
  private driftHeld = false;
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
    this.map = new BlockMap(index, {
      slot: o.slot, blockSize: o.blockSize, loraNames: o.loraNames ?? NO_LORA_NAMES,
      onOverflow: () => {
        this.overflowed = true;
        this.fallBack(FallbackReason.Overflow);
      },
    });
    this.checks = new PredictionChecks(index);
    index.resetStats(o.slot);
    index.setStat(o.slot, Stat.BlockSize, o.blockSize);
    index.setStat(o.slot, Stat.Precision, Number.NaN);
    index.setState(o.slot, StreamState.Fallback);
    this.checks.setChecking(o.slot, false);
    this.checks.nextEpoch(o.slot);
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
    this.map.reset();
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
    this.checks.setChecking(this.slot, false);
    this.index.setState(this.slot, StreamState.Off);
  }

  /**
   * Once per tick: the prediction checks recorded since the last (prediction-drift.ts). Judged while the stream
   * serves lookups or is held back by drift; in the other fallbacks the index is being rebuilt and says nothing.
   */
  checkPredictions(): void {
    const sums = this.checks.drain(this.slot, this.sums);
    if (!(this.live || this.driftHeld)) return;
    const judge = this.judge;
    judge.add(sums);
    const precision = judge.precision();
    // The gauge keeps the last judged value while a fresh window (after a drift) gathers its evidence.
    if (!Number.isNaN(precision)) this.index.setStat(this.slot, Stat.Precision, precision);
    const verdict = judge.verdict(this.live);
    if (verdict === 'drifted') this.drifted();
    else if (verdict === 'agrees' && this.driftHeld) {
      this.driftHeld = false;
      this.goLiveIfReady();
    }
  }

  /**
   * The events predict hits the replica does not report: whatever broke the index (a lost removal, a
   * publisher out of step with its engine), it is rebuilt from the replay buffer, from 0 (beyond the buffer:
   * the gap rule's turnover wait), and serves again only once its predictions agree with the reports.
   */
  private drifted(): void {
    this.driftHeld = true;
    this.judge.reset();
    this.fallBack(FallbackReason.Drift);
    this.clearAll();
    this.expected = 0;
    this.dupFrom = 0;
    this.lastPayload = null;
    this.pending = [];
    if (this.replaying) this.needsFullReplay = true;
    else if (this.connected) this.startReplay(0);
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
    this.map.reset();
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
    // Checks resume once the index is whole again (goLiveIfReady), also while drift holds the stream back.
    this.checks.setChecking(this.slot, false);
  }

  private goLiveIfReady(): void {
    if (this.replaying || this.resyncLeft > 0 || this.overflowed || this.index.isLive(this.slot)) return;
    this.checks.setChecking(this.slot, true);
    if (this.driftHeld) return;
    // Work done while the stream was not live is not silence: the rule starts again from here.
    this.lastBatchMs = this.o.nowMs();
    this.index.setState(this.slot, StreamState.Live);
  }

  private clearAll(): void {
    this.map.clear();
    this.overflowed = false;
    this.index.setStat(this.slot, Stat.Blocks, 0);
    this.checks.nextEpoch(this.slot);
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
      if (e.type === 'BlockStored') {
        const n = this.map.stored(e);
        if (this.resyncLeft > 0) this.resyncLeft -= n;
      } else if (e.type === 'BlockRemoved') this.map.removed(e);
      else {
        this.clearAll();
        if (this.resyncLeft > 0) this.resyncLeft = 0; // an empty cache is known exactly
      }
    }
    index.setStat(slot, Stat.Blocks, this.map.size);
  }
}
