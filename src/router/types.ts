// The router's contracts: what it reads about the fleet, what a policy is, what a decision carries, and the
// feedback the pipeline (or the fleet simulator) gives it as a request moves on. The gateway implements
// FleetView with the replica registry; the simulator implements it over simulated scrapes of mock engines in
// virtual time, so every policy runs unchanged in both.
// Thread: the acceptor. A decision does no I/O and has no await: a pure function of these reads.
import type { ReplyForecast } from '../gpu-time/reply-length/reply-forecast.ts';
import type { InflightLedger } from '../registry/inflight-ledger.ts';
import type { ReplicaRow } from '../registry/replica-table.ts';

/** The read side of the replica registry that routing needs (ReplicaRegistry implements it). */
export interface FleetView {
  candidates(poolId: string): readonly number[];
  isHealthy(slot: number): boolean;
  replica(slot: number): { readonly id: string; readonly draining: boolean; readonly adapters: readonly string[] | null };
  residentAdapters(slot: number): readonly string[];
  readonly ledger: InflightLedger;
  /**
   * Copies the slot's last scraped row (seqlock-consistent) into `out`, which the caller owns and reuses.
   * False when no consistent row of this member could be read: treat its load as unknown.
   */
  readRow(slot: number, out: ReplicaRow): boolean;
  /** The replica's block size differs from its pool's: its prefix-cache overlap must not be used. */
  prefixAffinityOff(slot: number): boolean;
  /** Milliseconds on the clock that rows' scrape stamps use (Date.now() live; virtual in the simulator). */
  nowMs(): number;
}

export interface RouteRequest {
  poolId: string;
  adapter: string | null;
  promptTokens: number;
  /** max_tokens per sequence: an upper bound on the reply, never its length unless no forecast is given. */
  maxTokens: number;
  /**
   * The reply's length as predicted from the pool's finished streams (src/gpu-time/reply-length/): KV figure,
   * per-stream TPOT rule and expected work read it. Absent: max_tokens is the reply's length.
   */
  reply?: ReplyForecast | undefined;
  /** Chained 16-token block hashes of the prompt (adapter keyed in), block 0 first. */
  blockHashes: Float64Array;
  /** Slots already tried by earlier attempts of this request. */
  excluded: readonly number[];
  /**
   * The TTFT this request is admitted against (admission sets it from the tenant's tier before routing);
   * absent, the pool's engine.ttft_target_ms. Prompts over 4,000 tokens get at least 1.25 × their idle TTFT.
   */
  ttftBudgetMs?: number;
  /**
   * The one slot this request may go to (a Responses API follow-up: only the replica that stored the previous
   * response can continue it), draining or not; absent for every other request.
   */
  pinned?: number;
  /**
   * The only slots this request may go to (an endpoint picker's subset hint, src/epp/); absent for every other
   * request. Members outside it are not counted as healthy: none inside it means no_healthy_replica.
   */
  subset?: readonly number[];
}

/** Why a policy chose its replica, for the route header and the decisions metric. */
export type RouteWhy = 'prefix' | 'cold' | 'load-bound' | 'headroom' | 'adapter' | 'policy';

/**
 * A policy's verdict on one request. Written by the policy into a Decision the caller owns (fields only, no
 * methods, so the pipeline can keep the figures it needs by copying numbers).
 */
export class Decision {
  slot = -1;
  /** Blocks of the prompt the router believes the chosen replica holds (0 for policies that do not look). */
  cachedBlocks = 0;
  /**
   * What the policy's own index believed the chosen replica holds, when the router judged the pick on better
   * information (fit-first.ts) and cachedBlocks carries that; −1: cachedBlocks is the policy's own.
   */
  policyCachedBlocks = -1;
  /**
   * The reply's length the policy predicted at dispatch, tokens; NaN when it predicts none. The simulator
   * holds it against the reply's length (reply_length_prediction).
   */
  predictedReplyTokens = Number.NaN;
  promptBlocks = 0;
  /** Predicted time to first token on the chosen replica, ms; NaN when the policy does not predict. */
  predictedTtftMs = Number.NaN;
  /** Predicted KV use of the chosen replica once this request holds its blocks, 0..1; NaN when unknown. */
  kvAfter = Number.NaN;
  why: RouteWhy = 'policy';
  /**
   * Blocks the KV-events index held of the prompt on the chosen replica at dispatch, for the index's own
   * prediction check (src/registry/kv-events/prediction-drift.ts); −1 when that replica's predictions are not
   * checked now. With eventsEpoch, the index generation it was read from.
   */
  eventsCachedBlocks = -1;
  eventsEpoch = 0;
  /**
   * The chosen replica's KV events serve the router's lookups (routing.prefix_index: events, its stream
   * live): its engine reports the reply's blocks as it caches them, so the gateway neither collects the reply's
   * text nor hashes it (set by Router.dispatched). Cost of that choice: if the stream later falls back, the
   * approximate index lacks this reply's blocks, and the conversation's next turn there predicts fewer hits
   * until the replica's cached_tokens report corrects it.
   */
  engineReportsReply = false;
  /**
   * The chosen replica can take the request without crossing its KV headroom or connection cap. False means
   * the policy picked the least bad replica of a full pool: admission control queues such a request.
   */
  fits = true;
  /** Tokens of prefill work ahead of and including this request on the chosen replica at decision time
   * (kv-aware; NaN otherwise): the numerator of the prefill-rate sample its first token gives. */
  workAheadTokens = Number.NaN;
  /** The prefill part of predictedTtftMs (kv-aware; NaN otherwise). */
  predictedPrefillMs = Number.NaN;
  // ---- The GPU-time model's figures for this attempt (src/gpu-time/), whatever the policy. ----
  /** Its TTFT prediction at admission, ms; NaN when none was made. */
  gpuTtftMs = Number.NaN;
  /** Its TPOT prediction for the batch it joins (decode step / (1 − ρ)), ms. */
  gpuTpotMs = Number.NaN;
  /** The decode-step part of gpuTtftMs (the steps the prefill rode in), ms. */
  gpuStepsMs = Number.NaN;
  /** Prefill work ahead of and including this request there, and this request's own, in equivalent tokens. */
  gpuWorkAhead = Number.NaN;
  gpuOwnWork = 0;
  /** Its first token came back (streamed or not). */
  gpuPrefilled = false;
  /** The replica's cumulative dispatched work just after this request's (the model's per-slot counter). */
  gpuWorkMark = 0;
  /** At its first token: model clock ms, the batch decoding, KV tokens, and the slot's cumulative prefilled work. */
  gpuFirstAtMs = Number.NaN;
  gpuFirstBatch = 0;
  gpuFirstKv = 0;
  gpuFirstDone = 0;
  /** At its first token: the replica's scraped prefill tokens, every gateway's (KvState.prefillTokensTotal). */
  gpuFirstScraped = Number.NaN;
  /** Its record in the model's per-stream slack registry (stream-slack.ts); -1 none. */
  gpuStream = -1;

  reset(): void {
    this.slot = -1;
    this.cachedBlocks = 0;
    this.policyCachedBlocks = -1;
    this.predictedReplyTokens = Number.NaN;
    this.promptBlocks = 0;
    this.predictedTtftMs = Number.NaN;
    this.kvAfter = Number.NaN;
    this.why = 'policy';
    this.fits = true;
    this.workAheadTokens = Number.NaN;
    this.predictedPrefillMs = Number.NaN;
    this.gpuTtftMs = Number.NaN;
    this.gpuTpotMs = Number.NaN;
    this.gpuStepsMs = Number.NaN;
    this.gpuWorkAhead = Number.NaN;
    this.gpuOwnWork = 0;
    this.gpuPrefilled = false;
    this.gpuWorkMark = 0;
    this.gpuFirstAtMs = Number.NaN;
    this.gpuFirstBatch = 0;
    this.gpuFirstKv = 0;
    this.gpuFirstDone = 0;
    this.gpuFirstScraped = Number.NaN;
    this.gpuStream = -1;
  }
}

/** A routing policy picks one slot among eligible candidates (already filtered) and says why. */
export interface RoutingPolicy {
  readonly name: string;
  /** Fills `out` (already reset, promptBlocks set); returns out.slot, -1 when none of `eligible` will do. */
  pick(req: RouteRequest, eligible: readonly number[], fleet: FleetView, out: Decision): number;
  /** Extra `; key=value` figures for the x-gateway-route header beyond the Decision's own. */
  describe(slot: number, req: RouteRequest, fleet: FleetView): string;
}

/**
 * What happens to a dispatched request, reported back so that stateful policies learn (prefix index, learned
 * prefill rates). Every hook is optional for a policy; the Router forwards each to the policy when present.
 * The pipeline calls them in this order, each at most once per attempt: dispatched → firstToken → finished.
 */
export interface RoutingFeedback {
  /** The request was sent to `slot` as decided (the index learns its prompt blocks there). */
  dispatched?(slot: number, req: RouteRequest, d: Decision): void;
  /** First token seen after `ttftMs` (from dispatch) on `slot`. */
  firstToken?(slot: number, req: RouteRequest, d: Decision, ttftMs: number): void;
  /**
   * The attempt ended. `cachedTokens` is what the replica reported (null when it did not say); `replyHashes`
   * are block hashes continuing the prompt's chain over the reply (null when not computed), which the replica
   * now holds in its prefix cache, as vLLM caches a finished sequence's blocks.
   */
  finished?(slot: number, req: RouteRequest, d: Decision, cachedTokens: number | null, replyHashes: Float64Array | null): void;
  /** The replica restarted (its cache is empty) or left the fleet: forget what it held. */
  replicaReset?(slot: number): void;
}
