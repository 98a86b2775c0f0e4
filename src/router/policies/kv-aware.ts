// kv-aware: one score in milliseconds (the GPU-time model's predicted TTFT), a load bound (looser for warm
// prompts), KV-headroom, TTFT-budget and TPOT avoidance, rendezvous placement of cold prefixes, and an approximate prefix index kept
// honest by feedback.
//   prefix index lookup → gpu-time-scorer → load-bound-filter → headroom-filter → tiered picker
//   (cold prompt: rendezvous weights as the key instead of TTFT)
// Feedback: dispatched → the index learns the prompt's blocks there; finished → a replica that reported fewer
// cached tokens than predicted loses its membership past the reported point, and a reply's block hashes
// extend the chain there; replicaReset → purge the slot. The GPU-time model learns through the Router.
// Thread: the acceptor. Hot path: pick() is O(blocks + candidates) with no allocation.
import type { GatewayConfig } from '../../config/schema.ts';
import { CandidateTable } from '../candidate-table.ts';
import { GpuTimeModel } from '../../gpu-time/gpu-time-model.ts';
import { HeadroomFilter } from '../filters/headroom-filter.ts';
import { LoadBoundFilter } from '../filters/load-bound-filter.ts';
import type { PrefixIndex } from '../prefix-index.ts';
import { Rendezvous } from '../pickers/rendezvous.ts';
import { TIER_FITS, TIER_FULL, TieredPicker } from '../pickers/tiered-picker.ts';
import { predictedCachedTokens } from '../cached-tokens.ts';
import { matchPrefix } from '../prefix-match.ts';
import { GpuTimeScorer } from '../scorers/gpu-time-scorer.ts';
import type { Decision, FleetView, RouteRequest, RouteWhy, RoutingFeedback, RoutingPolicy } from '../types.ts';

export interface KvAwareOptions {
  pools: GatewayConfig['pools'];
  index: PrefixIndex;
  /** The fleet this policy routes for; its ledger's slot count sizes every per-slot table. */
  fleet: FleetView;
  /** admission.stale_ms: rows older than this are not trusted. */
  staleMs: number;
  headroomRatio: number;
  connectionsPerReplica: number;
  loadBoundEpsilon: number;
  /** routing.warm_load_bound_epsilon: the bound of prompts some replica holds more than coldPrefixBlocks of. */
  warmLoadBoundEpsilon: number;
  coldPrefixBlocks: number;
  coldKeyBlock: number;
  /** admission.ttft_margin, .tpot_margin: a candidate fits when its predicted TTFT and TPOT are within these shares of their targets. */
  ttftMargin: number;
  tpotMargin: number;
  /** The gateway's GPU-time model (shared with admission); a policy of its own when absent (tests). */
  gpu?: GpuTimeModel;
}

export class KvAwarePolicy implements RoutingPolicy, RoutingFeedback {
  readonly name = 'kv-aware';
  readonly index: PrefixIndex;
  readonly gpu: GpuTimeModel;
  private readonly table: CandidateTable;
  private readonly scorer: GpuTimeScorer;
  private readonly loadBound: LoadBoundFilter;
  /** The looser bound of warm prompts. */
  private readonly warmBound: LoadBoundFilter;
  private readonly headroom: HeadroomFilter;
  private readonly rendezvous: Rendezvous;
  private readonly picker = new TieredPicker();
  private readonly coldPrefixBlocks: number;
  private readonly coldKeyBlock: number;

  constructor(o: KvAwareOptions) {
    const slots = o.fleet.ledger.slots;
    this.index = o.index;
    this.gpu = o.gpu ?? new GpuTimeModel(o.pools, o.fleet, o.staleMs);
    this.table = new CandidateTable(slots);
    this.scorer = new GpuTimeScorer(o.ttftMargin, o.tpotMargin);
    this.loadBound = new LoadBoundFilter(o.loadBoundEpsilon);
    this.warmBound = new LoadBoundFilter(o.warmLoadBoundEpsilon);
    this.headroom = new HeadroomFilter(o.headroomRatio, o.connectionsPerReplica);
    this.rendezvous = new Rendezvous(slots);
    this.coldPrefixBlocks = o.coldPrefixBlocks;
    this.coldKeyBlock = o.coldKeyBlock;
  }

  pick(req: RouteRequest, eligible: readonly number[], fleet: FleetView, out: Decision): number {
    const n = eligible.length;
    if (n === 0) return -1;
    const fig = this.gpu.figures(req.poolId);
    if (fig === undefined) return -1;
    const t = this.table;
    t.begin(eligible);
    const blocks = req.blockHashes.length;
    const maxMatch = matchPrefix(this.index, req, eligible, fleet, t);
    this.scorer.score(req, t, fleet, this.gpu, this.index);
    // Two load bounds. A cold prompt's rendezvous weight is blind to load: the tight bound (load_bound_epsilon)
    // spreads those. A warm one (a replica holds more than cold_prefix_blocks of it) is ranked by predicted
    // TTFT, which counts each queue, among the replicas where it fits: the tight bound only sent it from a
    // holder that could serve it in time to replicas that prefilled the prefix again. Its looser bound
    // (warm_load_bound_epsilon) stays for what the model cannot see: other gateways' requests between scrapes
    // (with none, four gateways herded a hot prefix: test/unit/sim/kv-events.test.ts). Tuned on the
    // simulator's tuning seeds 1-3 (seed mix, Mooncake, Azure; race settings): against 0.25 for every prompt,
    // warm ε 1 met the SLO for +3.3 points on the seed mix and +4.3 on Mooncake under `admission: none`,
    // −0.4 to +0.7 under Expediter's; the figures and the widths tried are in src/router/README.md.
    const warm = maxMatch > this.coldPrefixBlocks;
    (warm ? this.warmBound : this.loadBound).mark(t);
    this.headroom.mark(t);

    const cold = blocks > 0 && !warm;
    let chosen: number;
    let why: RouteWhy;
    if (cold) {
      const key = req.blockHashes[this.coldKeyBlock < blocks ? this.coldKeyBlock : blocks - 1]!;
      const top = this.rendezvous.weigh(key, t, fleet);
      chosen = this.picker.pickHighestWeight(t);
      why = chosen === top ? 'cold' : t.allowed[top] === 0 ? 'load-bound' : 'headroom';
    } else {
      chosen = this.picker.pickLeastTtft(t);
      why = this.whyWarm(req, t, chosen, blocks === 0);
    }
    if (chosen < 0) return -1;
    const tier = this.picker.tier;
    out.slot = t.slot[chosen]!;
    out.cachedBlocks = t.matched[chosen]!;
    out.predictedTtftMs = t.ttftMs[chosen]!;
    out.predictedPrefillMs = t.prefillMs[chosen]!;
    out.workAheadTokens = t.workTokens[chosen]!;
    // The GPU-time model learns from its own prediction at the first token (admission records the same).
    out.gpuTtftMs = out.predictedTtftMs;
    out.gpuStepsMs = out.predictedTtftMs - out.predictedPrefillMs;
    out.gpuWorkAhead = out.workAheadTokens;
    out.kvAfter = t.kvAfter[chosen]!;
    out.why = why;
    out.fits = tier === TIER_FITS || (tier !== TIER_FULL && t.fits[chosen] === 1);
    return out.slot;
  }

  /** Why a warm (or blockless) request went where it did, against the unconstrained best TTFT. */
  private whyWarm(req: RouteRequest, t: CandidateTable, chosen: number, blockless: boolean): RouteWhy {
    let best = -1;
    let bestFresh = 0;
    for (let i = 0; i < t.n; i++) {
      const f = t.fresh[i]!;
      if (best < 0 || f > bestFresh || (f === bestFresh && t.ttftMs[i]! < t.ttftMs[best]!)) {
        best = i;
        bestFresh = f;
      }
    }
    if (chosen !== best) return t.allowed[best] === 0 ? 'load-bound' : t.fits[best] === 0 ? 'headroom' : 'policy';
    if (blockless) return 'cold';
    if (t.matched[chosen]! > this.coldPrefixBlocks) return 'prefix';
    return req.adapter !== null && t.adapterMs[chosen] === 0 ? 'adapter' : 'policy';
  }

  describe(): string {
    return '';
  }

  dispatched(slot: number, req: RouteRequest, _d: Decision): void {
    if (req.blockHashes.length > 0) this.index.insert(req.blockHashes, 0, slot);
  }

  finished(slot: number, req: RouteRequest, d: Decision, cachedTokens: number | null, replyHashes: Float64Array | null): void {
    const fig = this.gpu.figures(req.poolId);
    if (fig !== undefined && cachedTokens !== null) {
      const bs = fig.blockSize;
      if (cachedTokens < predictedCachedTokens(d.cachedBlocks, req.promptTokens, bs)) {
        this.index.truncate(slot, req.blockHashes, Math.floor(cachedTokens / bs));
      }
    }
    if (replyHashes !== null && replyHashes.length > 0) this.index.insert(replyHashes, 0, slot);
  }

  replicaReset(slot: number): void {
    this.index.purgeSlot(slot);
  }
}
