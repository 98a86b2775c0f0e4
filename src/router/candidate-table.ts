// Per-candidate scratch of one routing decision: what the filters, scorers and pickers of a policy read and
// write, one typed-array column per figure, indexed by the candidate's position in the eligible list.
// Sized once to the registry's slot count (a pool never has more members), reused by every decision.
// Thread: the acceptor (one table per policy instance). Hot path: plain typed-array reads and writes.

export class CandidateTable {
  /** Candidates in use by the current decision. */
  n = 0;
  readonly slot: Int32Array;
  /** Consecutive prompt blocks from block 0 the prefix index believes the replica holds. */
  readonly matched: Int32Array;
  /** 1 when the replica's scraped row is younger than admission.stale_ms. */
  readonly fresh: Uint8Array;
  readonly ttftMs: Float64Array;
  /** The prefill part of ttftMs, and the tokens of prefill work it covers (queue ahead + own uncached). */
  readonly prefillMs: Float64Array;
  readonly workTokens: Float64Array;
  readonly adapterMs: Float64Array;
  /** KV use after this request's new blocks, 0..1; NaN when the replica's num_gpu_blocks is unknown. */
  readonly kvAfter: Float64Array;
  readonly inflight: Int32Array;
  /** The ledger's outstanding tokens there, and what this request would add there (uncached + max_tokens). */
  readonly outstanding: Float64Array;
  readonly addTokens: Float64Array;
  /**
   * Admission's GPU-time verdict for this request there (src/admission/gpu-fit.ts: TTFT and TPOT within their
   * limits, no stream harmed, or its worst case within budget where the model sees everything): 1 = passes.
   */
  readonly gpuFits: Uint8Array;
  /** Filter verdicts: 1 = passes. */
  readonly fits: Uint8Array;
  readonly allowed: Uint8Array;
  /** A picker's key (HRW weight, weighted score). */
  readonly weight: Float64Array;

  constructor(slots: number) {
    this.slot = new Int32Array(slots);
    this.matched = new Int32Array(slots);
    this.fresh = new Uint8Array(slots);
    this.ttftMs = new Float64Array(slots);
    this.prefillMs = new Float64Array(slots);
    this.workTokens = new Float64Array(slots);
    this.adapterMs = new Float64Array(slots);
    this.kvAfter = new Float64Array(slots);
    this.inflight = new Int32Array(slots);
    this.outstanding = new Float64Array(slots);
    this.addTokens = new Float64Array(slots);
    this.gpuFits = new Uint8Array(slots);
    this.fits = new Uint8Array(slots);
    this.allowed = new Uint8Array(slots);
    this.weight = new Float64Array(slots);
  }

  /** Starts a decision over `eligible`. */
  begin(eligible: readonly number[]): void {
    const n = eligible.length;
    this.n = n;
    for (let i = 0; i < n; i++) this.slot[i] = eligible[i]!;
  }
}
