// The prefix index the router reads with `routing.prefix_index: events`: for a candidate whose KV-event stream
// is live, its exact run from the events-fed index (src/registry/kv-events/events-index.ts); for the others
// (no kv_events, or a stream silent, broken or resyncing), the approximate index's. Everything the policies
// write (dispatch inserts, corrections, reply blocks, purges) still goes to the approximate index, so it is
// warm whenever a replica falls back to it.
// Thread: the acceptor (one instance per thread over the shared buffers). Hot path: lookup() once per decision;
// one state load per candidate, then one walk per index that serves some candidate; no allocation.
import { EventsIndex } from '../registry/kv-events/events-index.ts';
import { PrefixIndex } from './prefix-index.ts';

export class EventsPrefixIndex extends PrefixIndex {
  readonly events: EventsIndex;
  private readonly liveSlots: number[] = [];
  private readonly restSlots: number[] = [];
  private liveOut = new Int32Array(64);
  private restOut = new Int32Array(64);
  /** Per slot: 1 when the last lookup answered it from events (the route header's `index=`). */
  private readonly servedEvents: Uint8Array;

  /** Over an approximate index's buffer and an events index's buffer (both shared across threads). */
  constructor(approximate: SharedArrayBuffer, events: SharedArrayBuffer) {
    super(approximate);
    this.events = new EventsIndex(events);
    this.servedEvents = new Uint8Array(this.slots);
  }

  servedBy(slot: number): 'events' | 'approximate' {
    return this.servedEvents[slot] === 1 ? 'events' : 'approximate';
  }

  override lookup(hashes: Float64Array, candidates: readonly number[], out: Int32Array): number {
    const events = this.events;
    const live = this.liveSlots;
    const rest = this.restSlots;
    live.length = 0;
    rest.length = 0;
    for (let i = 0; i < candidates.length; i++) {
      const s = candidates[i]!;
      const on = events.isLive(s);
      this.servedEvents[s] = on ? 1 : 0;
      (on ? live : rest).push(s);
    }
    if (live.length === 0) return super.lookup(hashes, candidates, out);
    if (rest.length === 0) return events.lookup(hashes, candidates, out);
    if (this.liveOut.length < candidates.length) {
      this.liveOut = new Int32Array(candidates.length);
      this.restOut = new Int32Array(candidates.length);
    }
    events.lookup(hashes, live, this.liveOut);
    super.lookup(hashes, rest, this.restOut);
    let li = 0;
    let ri = 0;
    let best = 0;
    for (let i = 0; i < candidates.length; i++) {
      const v = this.servedEvents[candidates[i]!] === 1 ? this.liveOut[li++]! : this.restOut[ri++]!;
      out[i] = v;
      if (v > best) best = v;
    }
    return best;
  }
}
