// Messages between the main thread (ReplicaRegistry) and the poller thread, and the poller's workerData.
// Thread: both sides import these types. Not on the hot path: messages flow only on membership changes and on
// replica events (state change, restart, adapter set change), never per scrape.

export interface PollerSettings {
  scrapeIntervalMs: number;
  scrapeTimeoutMs: number;
  downAfterFailures: number;
  /** GET /health on every Nth scrape only (1 = every scrape, the default). Not in the config schema: a knob
   * for the benchmark, which measures what /health costs (half the poller's HTTP work). */
  healthEveryScrapes?: number;
}

export interface PollerWorkerData {
  tableBuffer: SharedArrayBuffer;
  /** The gateway's in-flight ledger: each scrape records the gateway's count for its replica in the row. */
  ledgerBuffer: SharedArrayBuffer;
  settings: PollerSettings;
  /** BroadcastChannel of the gateway's metrics; the poller reports each scrape there when set. */
  metricsChannel?: string;
}

/** Main → poller. Ordered (one MessagePort), so an unassign always lands before a reuse of the same slot. */
export type ToPoller =
  | {
    type: 'assign';
    slot: number;
    /** Main-thread membership token written into the row; a row with another token is not this replica's. */
    assignId: number;
    replicaId: string;
    url: string;
    /** The pool's block_size; a replica reporting another one gets ROW_FLAG.PREFIX_AFFINITY_OFF. */
    poolBlockSize: number;
  }
  | { type: 'unassign'; slot: number; assignId: number }
  | { type: 'settings'; settings: PollerSettings }
  | { type: 'stop' };

export const FAILURE_KIND = {
  /** Connection refused or reset: the process is gone or restarting. */
  UNREACHABLE: 'unreachable',
  TIMEOUT: 'timeout',
  /** /metrics or /health answered non-2xx (vLLM's /health is 503 when the engine is dead). */
  STATUS: 'status',
  /** /metrics answered 200 with a page that is not vLLM's. */
  NOT_VLLM: 'not_vllm',
} as const;
export type FailureKind = (typeof FAILURE_KIND)[keyof typeof FAILURE_KIND];

/** Poller → main. Every event carries slot and assignId so the main thread can drop events about a slot's
 * previous occupant that were in flight when the slot was reassigned. */
export type FromPoller =
  | { type: 'ready' }
  /** Sent once per assignment, after its first scrape attempt completes (good or not). */
  | { type: 'first-scrape'; slot: number; assignId: number; ok: boolean }
  | { type: 'state'; slot: number; assignId: number; state: number; reason: string }
  | { type: 'restart'; slot: number; assignId: number; generation: number; reason: string }
  | { type: 'adapters'; slot: number; assignId: number; running: string[]; waiting: string[] }
  | { type: 'warn'; slot: number; assignId: number; message: string };
