// KV events in the simulator: with `routing.prefix_index: events` in the gateway config, every engine's prefix
// cache changes go straight (through the run's KvEventFeed) into one exact events index (src/registry/kv-events/events-index.ts) as its block
// pool stores and evicts, and each simulated gateway's router reads it through EventsPrefixIndex, as the live
// gateway does for replicas whose stream is live. The simulated engines key blocks with the gateway's own
// hashes (no token ids to rebuild them from), and events arrive with no lag: this is the index a subscriber
// keeps when its streams are healthy, shared by every simulated gateway (each live gateway's is identical).
// A killed replica's entries are dropped (its stream breaks, so it falls back to the approximate index); a
// restarted one starts empty and live.
// Thread: the run's. Per cached or evicted block: one index write.
import type { GatewayConfig } from '../../src/config/schema.ts';
import type { GpuTimeModel } from '../../src/gpu-time/gpu-time-model.ts';
import { EventsIndex, StreamState } from '../../src/registry/kv-events/events-index.ts';
import { EventsPrefixIndex } from '../../src/router/events-prefix-index.ts';
import { PrefixIndex } from '../../src/router/prefix-index.ts';
import { INDEX_POLICIES, Router } from '../../src/router/route.ts';
import type { FleetView } from '../../src/router/types.ts';
import type { KvEventSink } from '../../src/router/anchors/kv-event-sink.ts';
import { buildPolicy } from './policies.ts';

/** The approximate index of a run none of whose streams falls back: never written, never read. */
const FAULTLESS_APPROXIMATE_ENTRIES = 64;

export class SimKvEvents implements KvEventSink {
  readonly index: EventsIndex;
  /**
   * Per slot: 1 once it stored a block since its entries were last dropped. EventsIndex.clearSlot is one pass
   * over every bucket (2.2 M entries for the 8B pool), and a run starts all 40 engines on an empty index: the
   * passes for slots that hold nothing were a tenth of a Mooncake run's CPU, and change nothing.
   */
  private readonly dirty: Uint8Array;

  /** No replica of the run dies or restarts: every stream stays live, the approximate index is never read. */
  private readonly faultless: boolean;

  constructor(slots: number, blocksPerReplica: number, faultless = false) {
    this.faultless = faultless;
    // Twice the blocks the fleet can hold: distinct hashes never exceed it, and the probe window stays short.
    // Sized to the blocks alone (the next power of two of buckets: half full where every cached block is
    // distinct, as on Azure's trace), 20 million adds and removals at that load left 5-6 buckets full in a
    // row and refused 0-2 adds in three draws; a refused add sends its replica to the approximate index
    // (overflow) and changes the run. A quarter full, the longest full run was 2. The smaller index saved about
    // 1-2 % of a seed-mix kv-aware run (the index 15.7 → 14.4 % of its samples).
    // Its readers (equal terms' judging lookups) are on this run's thread: no seqlock reads (same results).
    this.index = new EventsIndex({ entries: 2 * slots * blocksPerReplica, slots }, true);
    this.dirty = new Uint8Array(slots);
  }

  /**
   * Whether `policy` reads this index: createPolicy gives the router's prefix index to kv-aware alone (the
   * anchors keep their own, fed separately). For every other policy nothing reads the entries, so the run
   * does not feed them: one events-index write per cached or evicted block, a fifth of a Mooncake run's CPU.
   * The slots' stream states (what a route header reports) are kept either way.
   */
  static readBy(policy: string): boolean {
    return policy === 'kv-aware';
  }

  /** `routing.prefix_index: events` → the feed for a pool of `slots` engines of `blocksPerReplica` blocks; else null. */
  static forConfig(cfg: GatewayConfig, slots: number, blocksPerReplica: number, faultless = false): SimKvEvents | null {
    return cfg.routing.prefix_index === 'events' ? new SimKvEvents(slots, blocksPerReplica, faultless) : null;
  }

  /** The slot's (new) engine reports its cache from now on (through the run's KvEventFeed); it starts empty, so its index is exact at once. */
  live(slot: number): void {
    this.clear(slot);
    this.index.setState(slot, StreamState.Live);
  }

  stored(slot: number, hash: number): void {
    this.dirty[slot] = 1;
    this.index.add(slot, hash);
  }

  removed(slot: number, hash: number): void {
    this.index.remove(slot, hash);
  }

  /** The slot's engine died: nothing more comes from it. */
  cleared(slot: number): void {
    this.clear(slot);
    this.index.setState(slot, StreamState.Fallback);
  }

  /** Drops the slot's entries, if it has any. */
  private clear(slot: number): void {
    if (this.dirty[slot] === 0) return;
    this.index.clearSlot(slot);
    this.dirty[slot] = 0;
  }

  /** A gateway's router over `fleet` whose index policies read the events index for live slots. */
  router(cfg: GatewayConfig, fleet: FleetView, gpu: GpuTimeModel | null = null): Router {
    // A faultless run skips the approximate index's writes: with every stream live nothing reads them, so
    // no decision changes (the same flags give the same JSON either way) and a kv-aware run costs less; its
    // approximate index is then a token one (the default is 136 MiB to allocate and zero per run).
    const entries = this.faultless ? FAULTLESS_APPROXIMATE_ENTRIES : cfg.routing.prefix_index_entries;
    // The engines write the events index on this run's thread, so its reads skip the seqlock (same results).
    const index = new EventsPrefixIndex(new PrefixIndex({ entries, slots: this.index.slots }).buffer, this.index.buffer, !this.faultless, true);
    // buildPolicy, not createPolicy: a simulator-only policy (random) rides on a schema name in cfg.
    return new Router(buildPolicy(cfg, fleet, gpu ?? undefined, index), fleet, null, INDEX_POLICIES.has(cfg.routing.policy) ? index : null, gpu);
  }
}
