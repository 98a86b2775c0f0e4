// kv-aware: one score in milliseconds (predicted TTFT), a hard load bound, KV-headroom and TPOT avoidance,
// rendezvous placement of cold prefixes, and an approximate prefix index kept honest by feedback.
//   prefix index lookup → predicted-ttft-scorer → load-bound-filter → headroom-filter → tiered picker
//   (cold prompt: rendezvous weights as the key instead of TTFT)
// Feedback: dispatched → the index learns the prompt's blocks there; firstToken → the replica's prefill rate
// learns; finished → a replica that reported fewer cached tokens than predicted loses its membership past
// the reported point, and a reply's block hashes extend the chain there; replicaReset → purge the slot.
// Thread: the acceptor. Hot path: pick() is O(blocks + candidates) with no allocation.
import type { GatewayConfig } from '../../config/schema.ts';
import { CandidateTable } from '../candidate-table.ts';
import { EngineModel } from '../engine-model.ts';
import { HeadroomFilter } from '../filters/headroom-filter.ts';
import { LoadBoundFilter } from '../filters/load-bound-filter.ts';
import { KvEstimator } from '../kv-estimate.ts';
import { PrefillRateLearner } from '../prefill-rate.ts';
import type { PrefixIndex } from '../prefix-index.ts';
import { Rendezvous } from '../pickers/rendezvous.ts';
import { TIER_FITS, TIER_FULL, TieredPicker } from '../pickers/tiered-picker.ts';
import { predictedCachedTokens } from '../cached-tokens.ts';
import { matchPrefix } from '../prefix-match.ts';
import { PredictedTtftScorer } from '../scorers/predicted-ttft-scorer.ts';
import type { Decision, FleetView, RouteRequest, RouteWhy, RoutingFeedback, RoutingPolicy } from '../types.ts';

/** Learning the mean prompt length (for scraped waiting requests of unknown size): EWMA weight. */
const MEAN_PROMPT_ALPHA = 0.05;
/** First tokens after less prefill work than this say more about fixed costs than about the prefill rate. */
const MIN_RATE_SAMPLE_TOKENS = 256;

class PoolState {
  readonly model: EngineModel;
  meanPromptTokens = Number.NaN;
  constructor(model: EngineModel) {
    this.model = model;
  }
}

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
  coldPrefixBlocks: number;
  coldKeyBlock: number;
}

export class KvAwarePolicy implements RoutingPolicy, RoutingFeedback {
  readonly name = 'kv-aware';
  readonly index: PrefixIndex;
  readonly rates: PrefillRateLearner;
  private readonly pools = new Map<string, PoolState>();
  private readonly table: CandidateTable;
  private readonly scorer: PredictedTtftScorer;
  private readonly loadBound: LoadBoundFilter;
  private readonly headroom: HeadroomFilter;
  private readonly rendezvous: Rendezvous;
  private readonly picker = new TieredPicker();
  private readonly coldPrefixBlocks: number;
  private readonly coldKeyBlock: number;
  readonly kv: KvEstimator;

  constructor(o: KvAwareOptions) {
    const slots = o.fleet.ledger.slots;
    this.index = o.index;
    for (const p of o.pools) this.pools.set(p.id, new PoolState(new EngineModel(p)));
    this.table = new CandidateTable(slots);
    this.rates = new PrefillRateLearner(slots);
    this.kv = new KvEstimator(o.fleet, slots, o.staleMs);
    this.loadBound = new LoadBoundFilter(o.loadBoundEpsilon);
    this.headroom = new HeadroomFilter(o.headroomRatio, o.connectionsPerReplica);
    this.rendezvous = new Rendezvous(slots);
    this.scorer = new PredictedTtftScorer(this.kv, this.rates, o.index);
    this.coldPrefixBlocks = o.coldPrefixBlocks;
    this.coldKeyBlock = o.coldKeyBlock;
  }

  pick(req: RouteRequest, eligible: readonly number[], fleet: FleetView, out: Decision): number {
    const n = eligible.length;
    if (n === 0) return -1;
    const pool = this.pools.get(req.poolId);
    if (pool === undefined) return -1;
    const t = this.table;
    t.begin(eligible);
    const blocks = req.blockHashes.length;
    const maxMatch = matchPrefix(this.index, req, eligible, fleet, t);
    const meanPrompt = Number.isNaN(pool.meanPromptTokens) ? req.promptTokens : pool.meanPromptTokens;
    this.scorer.score(req, t, fleet, pool.model, meanPrompt);
    this.loadBound.mark(t);
    this.headroom.mark(t, pool.model.tpotTargetMs);

    const cold = blocks > 0 && maxMatch <= this.coldPrefixBlocks;
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
    const pool = this.pools.get(req.poolId);
    if (pool !== undefined) {
      const m = pool.meanPromptTokens;
      pool.meanPromptTokens = Number.isNaN(m) ? req.promptTokens : m + MEAN_PROMPT_ALPHA * (req.promptTokens - m);
    }
  }

  firstToken(slot: number, req: RouteRequest, d: Decision, ttftMs: number): void {
    const pool = this.pools.get(req.poolId);
    if (pool === undefined || !(d.workAheadTokens >= MIN_RATE_SAMPLE_TOKENS)) return;
    const fixedMs = d.predictedTtftMs - d.predictedPrefillMs;
    this.rates.observe(slot, d.workAheadTokens, ttftMs - fixedMs, pool.model.prefillTokensPerSecond);
  }

  finished(slot: number, req: RouteRequest, d: Decision, cachedTokens: number | null, replyHashes: Float64Array | null): void {
    const pool = this.pools.get(req.poolId);
    if (pool !== undefined && cachedTokens !== null) {
      const bs = pool.model.blockSize;
      if (cachedTokens < predictedCachedTokens(d.cachedBlocks, req.promptTokens, bs)) {
        this.index.truncate(slot, req.blockHashes, Math.floor(cachedTokens / bs));
      }
    }
    if (replyHashes !== null && replyHashes.length > 0) this.index.insert(replyHashes, 0, slot);
  }

  replicaReset(slot: number): void {
    this.index.purgeSlot(slot);
    this.kv.reset(slot);
    this.rates.reset(slot);
  }
}
