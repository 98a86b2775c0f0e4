// One simulated run's inputs and outputs: what a sweep worker is handed and what it sends back (both plain
// data, structured-clone safe). The output's fields are the contract's JSON run object plus the CPU cost.
// Thread: any.
import type { MaxTokensMode } from './traces.ts';

export interface FaultSpec {
  replica: string;
  atS: number;
}

/**
 * `none`: every request routed on arrival (the engines queue): routing alone; `native`: what the policy's own
 * system does by default; `expediter`: the gateway's AdmissionController.
 */
export type AdmissionMode = 'none' | 'native' | 'expediter';
export const ADMISSION_MODES: readonly AdmissionMode[] = ['none', 'native', 'expediter'];

/** routing.prefix_index: what kv-aware's prefix index is fed from (the anchors' indexes are their own). */
export type PrefixIndexMode = 'approximate' | 'events';
export const PREFIX_INDEX_MODES: readonly PrefixIndexMode[] = ['approximate', 'events'];

export interface RunSpec {
  /** Position in the sweep: results are reported in this order whatever thread finished first. */
  index: number;
  fleet: string;
  workload: string;
  pool: string;
  policy: string;
  load: number | null;
  rps: number | null;
  speed: number | null;
  /** Request rate the workload is generated at (seed-mix), or null for a trace (its own times / speed). */
  offeredRps: number | null;
  /** Time compression applied to a trace's timestamps (1 = as recorded). */
  traceSpeed: number;
  minutes: number;
  gateways: number;
  seed: number;
  retryShed: boolean;
  kills: FaultSpec[];
  restarts: FaultSpec[];
  admission: AdmissionMode;
  /** Each replica's step-time parameters drawn within ±this % of its profile (fixed per replica and seed). */
  engineErrorPct: number;
  /** Each engine step's duration scaled by a draw within ±this %. */
  stepJitterPct: number;
  /** Every replica's step-time parameters × one draw within ±this %, shared by the pool (fixed per seed). */
  engineBiasPct: number;
  /** Decode-only steps costed as vLLM's CUDA-graph batch. */
  batchPadding: boolean;
  /** A trace's max_tokens: the clients' caps (`caps`) or the recorded output (`recorded`, hindsight). */
  maxTokens: MaxTokensMode;
  /** Every replica's GPU KV blocks × this. */
  kvScale: number;
  /** Gateway → engine latency of each dispatch, ms. */
  dispatchMs: number;
  /** Overrides the fleet config's routing.prefix_index (null: the config's). */
  prefixIndex: PrefixIndexMode | null;
}

/** The contract's run object. */
export interface RunJson {
  policy: string;
  pool: string;
  load: number | null;
  rps: number | null;
  speed: number | null;
  gateways: number;
  offered_rps: number;
  admitted_rps: number;
  goodput_rps: number;
  slo_attainment: number;
  completed: number;
  shed: number;
  shed_answer_ms_p99: number | null;
  ttft_ms: { p50: number | null; p99: number | null };
  tpot_ms: { p95: number | null };
  kv_occupancy_mean: number | null;
  preemptions: number;
  prefix_hit_rate: { measured: number | null; predicted: number | null };
  inflight_tokens_max_over_mean: number | null;
  seed: number;
  admission: AdmissionMode;
  /** Gateway → engine latency of each dispatch in this run, ms. */
  dispatch_ms: number;
  /** routing.prefix_index of the run's gateways (what kv-aware's prefix index is fed from). */
  prefix_index?: PrefixIndexMode;
  /** Share of admitted requests that met their SLO (admission admits only what the GPU-time model expects to). */
  admitted_within_slo: number | null;
  /** Sheds decided at arrival (the rest waited in the queue until their deadline). */
  shed_at_arrival: number;
  /**
   * Runs whose TTFT was predicted at dispatch (the GPU-time model's figure, else the policy's): |predicted −
   * measured| / measured in %, both from dispatch to first token.
   */
  ttft_prediction: PredictionError | null;
  /**
   * Runs whose policy predicted each reply's length at dispatch (Decision.predictedReplyTokens): |predicted −
   * produced| / produced in %, over measured requests that finished; null when the policy predicts none.
   */
  reply_length_prediction: PredictionError | null;
  /** Where this run's window of a trace starts, trace seconds (null for seed-mix). */
  trace_window_s: number | null;
  max_tokens: MaxTokensMode;
}

export interface PredictionError {
  median_abs_error_pct: number | null;
  p90_abs_error_pct: number | null;
}

export interface RunOutput {
  index: number;
  json: RunJson;
  /** Requests the run simulated (warm-up included) and the CPU time of the thread that ran it: not part of the JSON. */
  simulatedRequests: number;
  cpuMs: number;
  /** Requests that failed (no healthy replica, or cut mid-stream by a kill). */
  failed: number;
  /** How admission was done in this run (the controller's name, or that everything was admitted). */
  admission: string;
  /** `native`: requests its admission rejected or queued (0: the run is the same as under `none`); else null. */
  nativeInterventions: number | null;
  /** Not run: the `none` twin of a `native` run whose admission never acted (run-output.ts noneTwin); no CPU, no requests of its own. */
  twin: boolean;
}
