// The KV-event subscriber: per replica with `kv_events`, a SUB socket on its publisher and, for each replay,
// a DEALER on its replay ROUTER, feeding a ReplicaStream; and the scrape-interval tick that judges silence
// from the replica table's prefix-cache counters. Runs in the kv-events worker, never on an acceptor.
// Thread: the kv-events worker. Per message: one ReplicaStream.onLive; per tick: one seqlocked row read and
// one prediction-check drain per replica.
import type { ReplicaTable } from '../replica-table.ts';
import { ReplicaRow } from '../replica-table.ts';
import type { EventsIndex } from './events-index.ts';
import { ReplicaStream, type StreamIo } from './replica-stream.ts';
import { readSeq, seqFrame, END_SEQ } from './wire.ts';
import { connectReplayDealer, connectSubscriber, replayEndpointOf, type Dealer, type Subscriber } from './zmq.ts';

export interface SubscriberConfig {
  /** Scrape interval: the silence tick. */
  tickMs: number;
  silenceTicks: number;
  /** A replay that has not ended after this long failed (its DEALER is closed). */
  replayTimeoutMs: number;
  reconnectIntervalMs: number;
  /** ZMTP heartbeats on the SUB socket: a publisher that stops answering PINGs is disconnected. */
  heartbeatIntervalMs: number;
  heartbeatTimeoutMs: number;
}

export interface ReplicaAssignment {
  slot: number;
  id: string;
  endpoint: string;
  blockSize: number;
  /** The pool's `lora_ids`: vLLM lora_int_id → adapter name, for events that carry only the id. */
  loraIds: ReadonlyArray<readonly [number, string]>;
}

const DEFAULT_CAPACITY_BLOCKS = 16_384;

/** Same replica, endpoint, block size and adapter ids: nothing to redo. */
export function sameAssignment(a: ReplicaAssignment, b: ReplicaAssignment): boolean {
  return a.id === b.id && a.endpoint === b.endpoint && a.blockSize === b.blockSize && JSON.stringify(a.loraIds) === JSON.stringify(b.loraIds);
}
const EMPTY = Buffer.alloc(0);

class ReplicaConnection implements StreamIo {
  readonly a: ReplicaAssignment;
  readonly stream: ReplicaStream;
  private readonly sub: Subscriber;
  private readonly cfg: SubscriberConfig;
  private replayToken = 0;
  private dealer: Dealer | null = null;
  private closed = false;

  constructor(a: ReplicaAssignment, index: EventsIndex, table: ReplicaTable, cfg: SubscriberConfig) {
    this.a = a;
    this.cfg = cfg;
    const row: ReplicaRow = new ReplicaRow();
    this.stream = new ReplicaStream(index, {
      slot: a.slot, blockSize: a.blockSize, silenceTicks: cfg.silenceTicks, tickMs: cfg.tickMs, nowMs: Date.now, loraNames: new Map(a.loraIds),
      capacityBlocks: () => (table.read(a.slot, row) && row.numGpuBlocks > 0 ? row.numGpuBlocks : DEFAULT_CAPACITY_BLOCKS),
    }, this);
    this.sub = connectSubscriber(a.endpoint, {
      topic: '', reconnectIntervalMs: cfg.reconnectIntervalMs, heartbeatIntervalMs: cfg.heartbeatIntervalMs, heartbeatTimeoutMs: cfg.heartbeatTimeoutMs,
      onConnect: () => {
        if (!this.closed) this.stream.onConnected();
      },
      onDisconnect: () => {
        if (!this.closed) this.stream.onDisconnected();
      },
    });
    void this.receiveLoop();
  }

  private async receiveLoop(): Promise<void> {
    try {
      for await (const frames of this.sub) {
        if (this.closed) return;
        if (frames.length !== 3) continue;
        const seq = readSeq(frames[1]!);
        if (!(seq >= 0)) continue;
        this.stream.onLive(seq, frames[2]!);
      }
    } catch {
      // closed
    }
  }

  requestReplay(fromSeq: number): void {
    const token = ++this.replayToken;
    this.dealer?.close();
    const dealer = connectReplayDealer(replayEndpointOf(this.a.endpoint), this.cfg.reconnectIntervalMs);
    this.dealer = dealer;
    void this.runReplay(dealer, token, fromSeq);
  }

  private async runReplay(dealer: Dealer, token: number, fromSeq: number): Promise<void> {
    const timer = setTimeout(() => dealer.close(), this.cfg.replayTimeoutMs);
    let ok = false;
    try {
      await dealer.send([EMPTY, seqFrame(fromSeq)]);
      for (;;) {
        const frames = await dealer.receive();
        if (token !== this.replayToken || this.closed) return;
        if (frames.length !== 3) continue;
        const seq = readSeq(frames[1]!);
        if (seq === END_SEQ) {
          ok = true;
          break;
        }
        if (seq >= 0) this.stream.onReplay(seq, frames[2]!);
      }
    } catch {
      // timed out (closed by the timer) or the socket failed
    } finally {
      clearTimeout(timer);
      if (!dealer.closed) dealer.close();
      if (this.dealer === dealer) this.dealer = null;
    }
    if (token === this.replayToken && !this.closed) this.stream.onReplayEnd(ok);
  }

  close(): void {
    this.closed = true;
    this.replayToken++;
    this.dealer?.close();
    this.sub.close();
    this.stream.close();
  }
}

/** Every replica's subscription, keyed by slot; the registry's assignments drive it. */
export class KvEventSubscriber {
  private readonly index: EventsIndex;
  private readonly table: ReplicaTable;
  private readonly cfg: SubscriberConfig;
  private readonly bySlot = new Map<number, ReplicaConnection>();
  private readonly row: ReplicaRow = new ReplicaRow();
  private readonly timer: ReturnType<typeof setInterval>;

  constructor(index: EventsIndex, table: ReplicaTable, cfg: SubscriberConfig) {
    this.index = index;
    this.table = table;
    this.cfg = cfg;
    this.timer = setInterval(() => this.tick(), cfg.tickMs);
  }

  /** Subscribes to the slot's replica (replacing a different assignment of the same slot). */
  assign(a: ReplicaAssignment): void {
    const cur = this.bySlot.get(a.slot);
    if (cur !== undefined && sameAssignment(cur.a, a)) return;
    cur?.close();
    this.bySlot.set(a.slot, new ReplicaConnection(a, this.index, this.table, this.cfg));
  }

  unassign(slot: number): void {
    this.bySlot.get(slot)?.close();
    this.bySlot.delete(slot);
  }

  /** The registry saw the replica restart: its cache is empty. */
  restarted(slot: number): void {
    this.bySlot.get(slot)?.stream.onRestart();
  }

  private tick(): void {
    const now = Date.now();
    for (const c of this.bySlot.values()) {
      const ok = this.table.read(c.a.slot, this.row);
      c.stream.tick(ok ? this.row.prefixQueriesTotal - this.row.prefixHitsTotal : Number.NaN, ok ? this.row.lastGoodScrapeMs : Number.NaN, now);
      c.stream.checkPredictions();
    }
  }

  close(): void {
    clearInterval(this.timer);
    for (const c of this.bySlot.values()) c.close();
    this.bySlot.clear();
  }
}
