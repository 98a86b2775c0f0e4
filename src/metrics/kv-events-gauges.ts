// The KV-event subscriber's figures, pulled at scrape time from the events index's per-replica counters
// (src/registry/kv-events/events-index.ts; the subscriber thread writes them, nothing is recorded per event
// on the main thread). Counters follow the index's running totals. Thread: main, once per GET /metrics.
import { Counter, Gauge, type Registry } from 'prom-client';
import type { BoundedLabel } from './labels.ts';

export interface KvEventsSource {
  counters(): Iterable<{ replica: string; events: number; gaps: number; replays: number; replayed: number; unmapped: number }>;
  fallbacks(): Iterable<{ replica: string; reason: string; count: number }>;
  lagSeconds(): Iterable<[string, number]>;
  live(): Iterable<[string, number]>;
  blocks(): Iterable<[string, number]>;
  precision(): Iterable<[string, number]>;
  /** The events index's occupied hash entries and its capacity (routing.kv_events_entries, rounded up). */
  occupancy(): { entries: number; capacity: number };
}

export function defineKvEventsGauges(reg: Registry, source: () => KvEventsSource | undefined, replicas: () => BoundedLabel): void {
  type Field = 'events' | 'gaps' | 'replays' | 'replayed' | 'unmapped';
  const counter = (name: string, help: string, field: Field): void => {
    const c: Counter<'replica'> = new Counter({
      name, help, labelNames: ['replica'] as const, registers: [reg],
      collect: () => {
        c.reset();
        const s = source();
        if (!s) return;
        for (const r of s.counters()) c.inc({ replica: replicas().label(r.replica) }, r[field]);
      },
    });
  };
  counter('gateway_kv_events_applied_total', 'KV events (BlockStored, BlockRemoved, AllBlocksCleared) applied to the exact prefix index, per replica.', 'events');
  counter('gateway_kv_events_gaps_total', 'Gaps in a replica\'s KV-event sequence numbers seen on the live stream.', 'gaps');
  counter('gateway_kv_events_replays_total', 'Replay requests sent to a replica\'s KV-event replay socket (gaps, reconnects, restarts).', 'replays');
  counter('gateway_kv_events_replayed_batches_total', 'KV-event batches recovered through replay.', 'replayed');
  counter('gateway_kv_events_unmapped_blocks_total', 'Stored blocks the gateway could not key (unknown parent, other block size, extra keys beyond the LoRA name).', 'unmapped');

  const fallbacks: Counter<'replica' | 'reason'> = new Counter({
    name: 'gateway_kv_events_fallbacks_total',
    help: 'Times a replica\'s lookups went from its KV events back to the approximate index, by reason (silent, broken, gap, overflow, restart, drift).',
    labelNames: ['replica', 'reason'] as const, registers: [reg],
    collect: () => {
      fallbacks.reset();
      const s = source();
      if (!s) return;
      for (const f of s.fallbacks()) fallbacks.inc({ replica: replicas().label(f.replica), reason: f.reason }, f.count);
    },
  });

  const gauge = (name: string, help: string, pick: (s: KvEventsSource) => Iterable<[string, number]>): void => {
    const g: Gauge<'replica'> = new Gauge({
      name, help, labelNames: ['replica'] as const, registers: [reg],
      collect: () => {
        g.reset();
        const s = source();
        if (!s) return;
        for (const [id, v] of pick(s)) g.set({ replica: replicas().label(id) }, v);
      },
    });
  };
  gauge('gateway_kv_events_lag_seconds', 'Receive time minus the engine\'s timestamp of the latest live KV-event batch, per replica.', (s) => s.lagSeconds());
  gauge('gateway_kv_events_live', '1 while a replica\'s prefix lookups are answered from its KV events, 0 while it falls back to the approximate index.', (s) => s.live());
  gauge('gateway_kv_events_blocks', 'Blocks a replica\'s prefix cache holds, as its KV events tell.', (s) => s.blocks());
  gauge('gateway_kv_events_prediction_precision',
    'Share of the cached tokens a replica\'s KV events predicted that the replica reported, over its last ~32k predicted tokens (absent until 8 requests and 1,024 tokens were predicted).',
    (s) => s.precision());

  // The index's fill, for an alert well before it refuses adds (overflow): its 8-bucket windows fill long
  // before the index does (src/registry/kv-events/README.md, "The index": none refused at 40 %, some from 50 %).
  const fill = (name: string, help: string, pick: (o: { entries: number; capacity: number }) => number): void => {
    const g = new Gauge({
      name, help, registers: [reg],
      collect: () => {
        g.reset();
        const s = source();
        if (s) g.set(pick(s.occupancy()));
      },
    });
  };
  fill('gateway_kv_events_index_entries', 'Occupied entries (distinct block hashes) of the KV-events-fed prefix index.', (o) => o.entries);
  fill('gateway_kv_events_index_capacity', 'Entries the KV-events-fed prefix index holds (routing.kv_events_entries, rounded up to whole buckets); past 40 % full an add may find no room and its replica falls back (reason="overflow").', (o) => o.capacity);
}
