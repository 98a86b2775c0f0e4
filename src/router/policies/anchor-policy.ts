// What the comparison policies (llm-d, llm-d-precise, sglang, dynamo) share: their own prefix index
// (anchors/block-holders.ts: every replica that holds a hash, no holder cap) fed the way the upstream router
// feeds it, and the per-decision candidate table their scorers fill. Two feeds:
//   - 'dispatch' (approximate): the prompt's blocks are stored for the chosen replica at dispatch, as those
//     routers' pre-request hooks do; each replica's LRU is bounded by `capacity`: its scraped num_gpu_blocks
//     ('scraped', llm-d) or a fixed bound of the router's own (SGLang's tree size); forgotten on a restart;
//   - 'events' (precise): the index changes only on the engines' KV events (kvEvents, the sink a feed
//     calls), as llm-d's precise prefix scorer and Dynamo's default do. A registry-detected restart does not
//     clear it: the feed's own clear did, and events stored since belong to the new process.
// They get none of kv-aware's corrections (reported cached tokens, reply blocks, headroom).
// Thread: the acceptor. Hot path: pick() in each subclass; insert at dispatch is one index write per block.
import { ReplicaRow } from '../../registry/replica-table.ts';
import { BlockHolders } from '../anchors/block-holders.ts';
import type { KvEventSink } from '../anchors/kv-event-sink.ts';
import { CandidateTable } from '../candidate-table.ts';
import { matchPrefix } from '../prefix-match.ts';
import { rankTable, type RankedPolicy } from '../ranking.ts';
import type { Decision, FleetView, RouteRequest, RoutingFeedback, RoutingPolicy } from '../types.ts';

export interface AnchorIndexOptions {
  feed: 'dispatch' | 'events';
  /** Each replica's LRU bound in blocks: its scraped num_gpu_blocks, or a fixed count. Ignored for events. */
  capacity: 'scraped' | number;
  /** Replicas one hash keeps, least recently stored forgotten first (default: no cap). */
  holdersPerHash?: number;
}

export abstract class AnchorPolicy implements RoutingPolicy, RoutingFeedback, RankedPolicy {
  abstract readonly name: string;
  readonly index: BlockHolders;
  /** Where KV events go for an event-fed policy; null for an approximate one. */
  readonly kvEvents: KvEventSink | null;
  protected readonly table: CandidateTable;
  private readonly fromEvents: boolean;
  private readonly scrapedCapacity: boolean;
  private readonly capRow = new ReplicaRow();
  /** The last pick's ranking key per table position (rankedBy), its direction and the position chosen. */
  protected readonly rankKey: Float64Array;
  private rankDescending = false;
  private rankChosen = -1;
  private readonly rankOrder: Int32Array;

  constructor(slots: number, o: AnchorIndexOptions) {
    this.fromEvents = o.feed === 'events';
    this.scrapedCapacity = !this.fromEvents && o.capacity === 'scraped';
    const fixed = this.fromEvents || o.capacity === 'scraped' ? Infinity : o.capacity;
    const index = new BlockHolders(slots, fixed, o.holdersPerHash ?? Infinity);
    this.index = index;
    this.table = new CandidateTable(slots);
    this.rankKey = new Float64Array(slots);
    this.rankOrder = new Int32Array(slots);
    this.kvEvents = this.fromEvents
      ? {
        stored: (slot, hash) => { index.store(slot, hash); },
        removed: (slot, hash) => { index.remove(slot, hash); },
        cleared: (slot) => { index.clearSlot(slot); },
      }
      : null;
  }

  abstract pick(req: RouteRequest, eligible: readonly number[], fleet: FleetView, out: Decision): number;

  /** Starts a decision: the candidates in this.table, each one's matched prefix blocks filled in; the longest. */
  protected matchAll(req: RouteRequest, eligible: readonly number[], fleet: FleetView): number {
    this.table.begin(eligible);
    if (this.scrapedCapacity) {
      // llm-d sizes each pod's LRU from cache_config_info's num_gpu_blocks once the scrape has it.
      const row = this.capRow;
      for (let i = 0; i < eligible.length; i++) {
        const slot = eligible[i]!;
        if (fleet.readRow(slot, row) && row.numGpuBlocks >= 1) this.index.setCapacity(slot, row.numGpuBlocks);
      }
    }
    return matchPrefix(this.index, req, eligible, fleet, this.table);
  }

  /** The last pick ranked its table's candidates by this.rankKey, best first by `descending`, and chose `chosen`. */
  protected rankedBy(descending: boolean, chosen: number): void {
    this.rankDescending = descending;
    this.rankChosen = chosen;
  }

  ranking(slots: Int32Array, matched: Int32Array): number {
    return rankTable(this.table, this.rankKey, this.rankDescending, this.rankChosen, slots, matched, this.rankOrder);
  }

  describe(_slot: number, _req: RouteRequest, _fleet: FleetView): string {
    return '';
  }

  dispatched(slot: number, req: RouteRequest, _d: Decision): void {
    if (!this.fromEvents && req.blockHashes.length > 0) this.index.insert(req.blockHashes, 0, slot);
  }

  replicaReset(slot: number): void {
    if (!this.fromEvents) this.index.clearSlot(slot);
  }
}
