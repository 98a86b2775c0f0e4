// The simulator's KV events: each engine's block pool tells the feed of every hash it caches and every cached
// hash it evicts (BlockPoolListener), and the feed passes them, with the replica's slot, to every subscribed
// gateway's event-fed index at once (no transport delay, no loss). A replica whose process dies is a clear
// (its KV is gone with it); a restarted one starts empty and publishes from its first stored block. The
// simulator's block hashes are the gateway's, so nothing is mapped.
// Thread: the run's. Hot path: one call per subscriber per stored or evicted block; nothing is attached
// while no gateway subscribes.
import type { KvEventSink } from '../../src/router/anchors/kv-event-sink.ts';
import type { MockEngine } from '../../test/mock-replica/engine/engine.ts';

export class KvEventFeed {
  private readonly sinks: KvEventSink[] = [];
  /** Events delivered (one per subscriber), for tests and the run's cost notes. */
  delivered = 0;

  /** A gateway's event-fed index hears every replica from now on. */
  subscribe(sink: KvEventSink): void {
    this.sinks.push(sink);
  }

  get subscribers(): number {
    return this.sinks.length;
  }

  /** The engine now serving `slot` publishes here (a no-op while nobody subscribes). */
  attach(slot: number, engine: MockEngine): void {
    if (this.sinks.length === 0) return;
    const sinks = this.sinks;
    engine.setKvListener({
      stored: (hash) => {
        for (let i = 0; i < sinks.length; i++) sinks[i]!.stored(slot, hash);
        this.delivered += sinks.length;
      },
      removed: (hash) => {
        for (let i = 0; i < sinks.length; i++) sinks[i]!.removed(slot, hash);
        this.delivered += sinks.length;
      },
    });
  }

  /** The engine of `slot` is gone (its process died): it stops publishing and every index forgets it. */
  detach(slot: number, engine: MockEngine): void {
    engine.setKvListener(null);
    for (let i = 0; i < this.sinks.length; i++) this.sinks[i]!.cleared(slot);
  }
}
