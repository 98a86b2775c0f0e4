// Main-thread side of the KV-event subscriber: owns the exact index's SharedArrayBuffer, runs the kv-events
// worker (restarted after a crash, every subscription then rebuilt from a full replay), keeps its
// subscriptions in step with the registry's membership, forwards registry restarts, and gives /metrics
// its per-replica figures. Thread: main. Setup, reload and scrape time only.
import type { Worker } from 'node:worker_threads';
import type { GatewayConfig } from '../../config/schema.ts';
import type { ReplicaRegistry } from '../replica-registry.ts';
import { siblingModule, spawnWorker, POLLER_YOUNG_GENERATION_MB } from '../../util/spawn-worker.ts';
import { EventsIndex, FALLBACK_REASONS, Stat, StreamState, type FallbackReasonName } from './events-index.ts';
import type { FromKvEvents, KvEventsWorkerData, ToKvEvents } from './protocol.ts';
import { sameAssignment, type ReplicaAssignment, type SubscriberConfig } from './subscriber.ts';
import { prefaultPages } from '../../util/prefault.ts';

const WORKER_URL = siblingModule('../../../workers/kv-events.worker', import.meta.url);
const RESTART_DELAY_MS = 1000;
const STOP_GRACE_MS = 2000;

export interface KvEventsMetricSources {
  /** Per replica with events: [id, events applied, batches, gaps, replays, batches recovered by replay, unmapped blocks]. */
  counters(): Iterable<{ replica: string; events: number; gaps: number; replays: number; replayed: number; unmapped: number }>;
  fallbacks(): Iterable<{ replica: string; reason: FallbackReasonName; count: number }>;
  /** [replica, lag of its latest live batch in seconds]. */
  lagSeconds(): Iterable<[string, number]>;
  /** [replica, 1 when events serve its lookups]. */
  live(): Iterable<[string, number]>;
  /** [replica, blocks its engine holds as the events tell]. */
  blocks(): Iterable<[string, number]>;
  /** [replica, share of its events-predicted cached tokens it confirmed], for replicas with enough evidence. */
  precision(): Iterable<[string, number]>;
  /** The index's occupied entries and its capacity. */
  occupancy(): { entries: number; capacity: number };
}

export class KvEventsService {
  readonly index: EventsIndex;
  private readonly registry: ReplicaRegistry;
  private readonly settings: SubscriberConfig;
  private readonly log: (msg: string) => void;
  private worker: Worker | null = null;
  private closing = false;
  private restartTimer: ReturnType<typeof setTimeout> | null = null;
  /** slot → what it was assigned (so a reload sends only changes). */
  private readonly assigned = new Map<number, ReplicaAssignment>();

  private constructor(cfg: GatewayConfig, registry: ReplicaRegistry, log: (msg: string) => void) {
    this.registry = registry;
    this.log = log;
    this.index = new EventsIndex({ entries: cfg.routing.kv_events_entries, slots: registry.ledger.slots });
    // Before the subscriber thread shares it: its pages are faulted in now, not under a burst of events.
    prefaultPages(this.index.buffer);
    const interval = cfg.registry.scrape_interval_ms;
    this.settings = {
      tickMs: interval, silenceTicks: cfg.routing.kv_events_silence_scrapes, replayTimeoutMs: Math.max(2000, 20 * interval),
      reconnectIntervalMs: Math.min(interval, 100), heartbeatIntervalMs: Math.max(interval, 100), heartbeatTimeoutMs: Math.max(3 * interval, 300),
    };
  }

  /** The service for `cfg`, or null when routing.prefix_index is not `events`. */
  static async start(cfg: GatewayConfig, registry: ReplicaRegistry, log: (msg: string) => void): Promise<KvEventsService | null> {
    if (cfg.routing.prefix_index !== 'events') return null;
    const s = new KvEventsService(cfg, registry, log);
    await s.spawn();
    s.sync(cfg);
    return s;
  }

  /** Subscribes to every configured replica with kv_events, and drops the subscriptions of the others. */
  sync(cfg: GatewayConfig): void {
    const want = new Map<number, ReplicaAssignment>();
    for (const pool of cfg.pools) {
      for (const r of pool.replicas) {
        if (r.kv_events === undefined) continue;
        const slot = this.registry.slotOf(r.id);
        const loraIds = Object.entries(pool.lora_ids).map(([id, adapter]): [number, string] => [Number(id), adapter]);
        if (slot >= 0) want.set(slot, { slot, id: r.id, endpoint: r.kv_events, blockSize: pool.block_size, loraIds });
      }
    }
    for (const slot of this.assigned.keys()) {
      if (!want.has(slot)) {
        this.send({ type: 'unassign', slot });
        this.assigned.delete(slot);
      }
    }
    for (const [slot, a] of want) {
      const cur = this.assigned.get(slot);
      if (cur !== undefined && sameAssignment(cur, a)) continue;
      this.assigned.set(slot, a);
      this.send({ type: 'assign', ...a });
    }
  }

  /** The registry saw the slot's replica restart. */
  restarted(slot: number): void {
    if (this.assigned.has(slot)) this.send({ type: 'restarted', slot });
  }

  /** 'events' when the slot's lookups are answered by its events now, else 'approximate'. */
  servedBy(slot: number): 'events' | 'approximate' {
    return this.index.isLive(slot) ? 'events' : 'approximate';
  }

  metricSources(): KvEventsMetricSources {
    const ix = this.index;
    const each = function* <T>(assigned: Map<number, ReplicaAssignment>, f: (slot: number, id: string) => T): Iterable<T> {
      for (const [slot, a] of assigned) yield f(slot, a.id);
    };
    return {
      counters: () => each(this.assigned, (slot, replica) => ({
        replica, events: ix.stat(slot, Stat.Events), gaps: ix.stat(slot, Stat.Gaps), replays: ix.stat(slot, Stat.Replays),
        replayed: ix.stat(slot, Stat.Replayed), unmapped: ix.stat(slot, Stat.Unmapped),
      })),
      fallbacks: () => {
        const out: Array<{ replica: string; reason: FallbackReasonName; count: number }> = [];
        for (const [slot, a] of this.assigned) FALLBACK_REASONS.forEach((reason, i) => out.push({ replica: a.id, reason, count: ix.stat(slot, Stat.Fallbacks + i) }));
        return out;
      },
      lagSeconds: () => each(this.assigned, (slot, id): [string, number] => [id, ix.stat(slot, Stat.LagSeconds)]),
      live: () => each(this.assigned, (slot, id): [string, number] => [id, ix.state(slot) === StreamState.Live ? 1 : 0]),
      blocks: () => each(this.assigned, (slot, id): [string, number] => [id, ix.stat(slot, Stat.Blocks)]),
      precision: () => [...each(this.assigned, (slot, id): [string, number] => [id, ix.stat(slot, Stat.Precision)])].filter(([, p]) => !Number.isNaN(p)),
      occupancy: () => ({ entries: ix.entries(), capacity: ix.capacityEntries }),
    };
  }

  async close(): Promise<void> {
    this.closing = true;
    if (this.restartTimer !== null) clearTimeout(this.restartTimer);
    const w = this.worker;
    this.worker = null;
    if (w !== null) {
      // The thread closes its sockets and exits by itself; terminating it with ZeroMQ sockets open aborts the
      // process (the native addon throws from its finaliser), so terminate only one that does not exit.
      const exited = new Promise<void>((resolve) => w.once('exit', () => resolve()));
      w.postMessage({ type: 'stop' } satisfies ToKvEvents);
      const timer = new Promise<boolean>((resolve) => setTimeout(() => resolve(false), STOP_GRACE_MS).unref());
      if (!(await Promise.race([exited.then(() => true), timer]))) await w.terminate();
    }
  }

  private send(msg: ToKvEvents): void {
    this.worker?.postMessage(msg);
  }

  private spawn(): Promise<void> {
    const data: KvEventsWorkerData = { indexBuffer: this.index.buffer, tableBuffer: this.registry.table.buffer, settings: this.settings };
    const w = spawnWorker(WORKER_URL, { workerData: data, name: 'kv-events', resourceLimits: { maxYoungGenerationSizeMb: POLLER_YOUNG_GENERATION_MB } });
    this.worker = w;
    return new Promise<void>((resolve, reject) => {
      let ready = false;
      w.on('message', (msg: FromKvEvents) => {
        if (msg.type === 'ready' && !ready) {
          ready = true;
          resolve();
        }
      });
      w.on('error', (err) => {
        this.log(`[kv-events] subscriber thread failed: ${err.stack ?? String(err)}`);
        if (!ready) reject(err);
      });
      w.on('exit', (code) => {
        if (this.worker !== w || this.closing) return;
        this.worker = null;
        // Until the new thread has replayed each stream, the index is not trusted: every slot serves approximate.
        for (const slot of this.assigned.keys()) this.index.setState(slot, StreamState.Fallback);
        this.log(`[kv-events] subscriber thread exited (code ${code}); restarting in ${RESTART_DELAY_MS} ms`);
        this.restartTimer = setTimeout(() => {
          this.restartTimer = null;
          this.spawn().then(() => { for (const a of this.assigned.values()) this.send({ type: 'assign', ...a }); }, () => {});
        }, RESTART_DELAY_MS);
        this.restartTimer.unref();
      });
    });
  }
}
