// The prefix index the router reads with `routing.prefix_index: events`: for a candidate whose KV-event stream
// is live, its exact run from the events-fed index (src/registry/kv-events/events-index.ts); for the others
// (no kv_events, or a stream silent, broken or resyncing), the approximate index's. Everything the policies
// write (dispatch inserts, corrections, reply blocks, purges) still goes to the approximate index, so it is
// warm whenever a replica falls back to it.
// It also checks the events index against the replicas' reports (src/registry/kv-events/prediction-drift.ts):
// at dispatch it reads the chosen replica's events run (also while that replica is held back by drift, when
// the approximate index routes it), and when the replica answers it records predicted against reported cached
// tokens for the kv-events worker to judge.
// Thread: the acceptor (one instance per thread over the shared buffers). Hot path: lookup() once per decision;
// one state load per candidate, then one walk per index that serves some candidate; no allocation. The check
// reuses the run the decision's lookup found for a replica served from events (one store per live candidate
// per lookup); for a replica held back by drift it walks the events index once more (one bucket read per
// block of its run: 3.5 µs of CPU for a 112-block run on the shared VM), and it costs three Atomics.add per
// answer.
import { EventsIndex, Stat } from '../registry/kv-events/events-index.ts';
import { PredictionChecks } from '../registry/kv-events/prediction-drift.ts';
import { predictedCachedTokens } from './cached-tokens.ts';
import { PrefixIndex } from './prefix-index.ts';
import type { Decision, RouteRequest } from './types.ts';

export class EventsPrefixIndex extends PrefixIndex {
  readonly events: EventsIndex;
  private readonly liveSlots: number[] = [];
  private readonly restSlots: number[] = [];
  private liveOut = new Int32Array(64);
  private restOut = new Int32Array(64);
  /** Per slot: 1 when the last lookup answered it from events (the route header's `index=`). */
  private readonly servedEvents: Uint8Array;
  private readonly checks: PredictionChecks;
  private readonly one: number[] = [0];
  private readonly oneOut = new Int32Array(1);
  /** The hashes of the last lookup, and per slot served from events there, its run. */
  private lastHashes: Float64Array | null = null;
  private readonly lastRun: Int32Array;

  /**
   * False: dispatches, corrections and reply blocks are not written to the approximate index. Only for a
   * caller that knows no stream will ever fall back (the fleet simulator's runs without faults, whose
   * engines publish every event): nothing would read those writes, which were a quarter of a Mooncake
   * kv-aware run's CPU. The live gateway keeps them (the default).
   */
  private readonly approximateWrites: boolean;

  /**
   * Over an approximate index's buffer and an events index's buffer (both shared across threads).
   * `eventsSameThread`: the events index's writer runs on this thread (the simulator), so its reads skip the
   * seqlock (EventsIndex's `sameThread`); the live gateway's writer is the kv-events worker (the default).
   */
  constructor(approximate: SharedArrayBuffer, events: SharedArrayBuffer, approximateWrites = true, eventsSameThread = false) {
    super(approximate);
    this.events = new EventsIndex(events, eventsSameThread);
    this.servedEvents = new Uint8Array(this.slots);
    this.lastRun = new Int32Array(this.slots);
    this.checks = new PredictionChecks(this.events);
    this.approximateWrites = approximateWrites;
  }

  checkDispatched(req: RouteRequest, d: Decision): void {
    const slot = d.slot;
    if (!this.checks.checking(slot)) {
      d.eventsCachedBlocks = -1;
      return;
    }
    d.eventsEpoch = this.checks.epoch(slot);
    if (this.servedEvents[slot] === 1 && this.lastHashes === req.blockHashes) {
      d.eventsCachedBlocks = this.lastRun[slot]!;
      return;
    }
    this.one[0] = slot;
    this.events.lookup(req.blockHashes, this.one, this.oneOut);
    d.eventsCachedBlocks = this.oneOut[0]!;
  }

  checkFinished(req: RouteRequest, d: Decision, cachedTokens: number | null): void {
    if (d.eventsCachedBlocks < 0 || cachedTokens === null) return;
    const bs = this.events.stat(d.slot, Stat.BlockSize);
    if (!(bs > 0)) return;
    this.checks.record(d.slot, d.eventsEpoch, predictedCachedTokens(d.eventsCachedBlocks, req.promptTokens, bs), cachedTokens);
  }

  override insert(hashes: Float64Array, from: number, slot: number): number {
    return this.approximateWrites ? super.insert(hashes, from, slot) : 0;
  }

  override truncate(slot: number, hashes: Float64Array, from: number): number {
    return this.approximateWrites ? super.truncate(slot, hashes, from) : 0;
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
    this.lastHashes = hashes;
    if (live.length === 0) return super.lookup(hashes, candidates, out);
    if (rest.length === 0) {
      const best = events.lookup(hashes, candidates, out);
      for (let i = 0; i < candidates.length; i++) this.lastRun[candidates[i]!] = out[i]!;
      return best;
    }
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
      const s = candidates[i]!;
      let v: number;
      if (this.servedEvents[s] === 1) this.lastRun[s] = v = this.liveOut[li++]!;
      else v = this.restOut[ri++]!;
      out[i] = v;
      if (v > best) best = v;
    }
    return best;
  }
}
