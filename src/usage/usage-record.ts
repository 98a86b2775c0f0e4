// The usage record: one per completion request that authenticated as a tenant, whatever its outcome.
// Field names are part of the external interface (listed in README): consumers read them. Thread: main.
export interface UsageRecord {
  request_id: string;
  tenant: string;
  model: string;
  pool: string | null;
  adapter: string | null;
  replica: string | null;
  status: number;
  finish_reason: string | null;
  input_tokens: number;
  output_tokens: number;
  cached_tokens: number;
  /** What the router predicted the replica would report as cached_tokens (its prefix-index match). */
  predicted_cached_tokens: number;
  ttft_ms: number | null;
  duration_ms: number;
  retries: number;
  cancelled: boolean;
  /** Time spent in the admission queue, ms (0 when admitted at once or refused before admission). */
  queue_ms: number;
  ts: string;
}

/** Where records go. write() never throws and never blocks the request; flush() is for shutdown. */
export interface UsageSink {
  readonly name: string;
  /** True: write() reads only the record, so the recorder need not serialise a line for it. */
  readonly recordOnly?: boolean;
  write(line: string, record: UsageRecord): void;
  flush(): Promise<void>;
  close(): Promise<void>;
}
