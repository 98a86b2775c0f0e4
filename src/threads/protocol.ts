// Messages between the main thread and its acceptor threads (one Worker port each, FIFO, so a usage record
// posted before `closed` is always read before it). Thread: both sides. Per request: one `call` and one `ret`
// for each quota acquire/settle (Redis backend only: the memory backend's table is shared) and each pooled
// tokenize task, one `usage` message.
import type { GatewayConfig } from '../config/schema.ts';
import type { MembershipSnapshot } from '../registry/replica-set.ts';
import type { UsageRecord } from '../usage/usage-record.ts';
import type { LogLevel } from '../logging/logger.ts';
import type { SharedQuotaDescriptor } from '../quota/shared-quota-table.ts';

export interface AcceptorWorkerData {
  index: number;
  cfg: GatewayConfig;
  env: Record<string, string | undefined>;
  port: number;
  tableBuffer: SharedArrayBuffer;
  ledgerBuffer: SharedArrayBuffer;
  prefixBuffer: SharedArrayBuffer;
  /** The KV-events index (routing.prefix_index: events): lookups of live replicas are answered from it. */
  eventsBuffer?: SharedArrayBuffer;
  /** Int32 per acceptor: its completion requests in flight (Gateway.inflightCount sums them). */
  inflightBuffer: SharedArrayBuffer;
  membership: MembershipSnapshot;
  metricsChannel: string;
  logLevel: LogLevel;
  /** The main thread has a tokenizer pool: send prompts above inline_max_chars to it. */
  remotePool: boolean;
  /** Memory quota backend: the process's shared table and its tenant slots (else quota calls go to the main thread). */
  sharedQuota: { desc: SharedQuotaDescriptor; slots: Map<string, number> } | null;
}

/** Stage calls the acceptor makes into the main thread's single instances. */
export type CallMethod = 'acquire' | 'settle' | 'tokenize' | 'replyHashes' | 'metrics';

export interface ErrorShape {
  name: string;
  message: string;
}

export type ToMain =
  | { t: 'listening'; port: number }
  | { t: 'listen-failed'; message: string }
  | { t: 'call'; id: number; m: CallMethod; a: unknown[] }
  | { t: 'cancel'; id: number }
  | { t: 'usage'; r: UsageRecord }
  | { t: 'reloaded'; seq: number }
  | { t: 'closed' };

export type ToAcceptor =
  | { t: 'ret'; id: number; v?: unknown; err?: ErrorShape }
  | { t: 'membership'; m: MembershipSnapshot; downAfter: number }
  | { t: 'restart'; slot: number }
  | { t: 'reload'; seq: number; cfg: GatewayConfig; m: MembershipSnapshot; left: number[]; quotaSlots: Map<string, number> | null }
  | { t: 'shutdown'; graceMs: number };
