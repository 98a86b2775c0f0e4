// Messages between the main thread (KvEventsService) and the kv-events worker. Thread: both.
import type { ReplicaAssignment, SubscriberConfig } from './subscriber.ts';

export interface KvEventsWorkerData {
  indexBuffer: SharedArrayBuffer;
  tableBuffer: SharedArrayBuffer;
  settings: SubscriberConfig;
}

export type ToKvEvents =
  | ({ type: 'assign' } & ReplicaAssignment)
  | { type: 'unassign'; slot: number }
  | { type: 'restarted'; slot: number }
  | { type: 'stop' };

export type FromKvEvents = { type: 'ready' };
