// Dynamo's native admission with its defaults: the KV router's scheduler queue (ai-dynamo/dynamo
// lib/kv-router/src/scheduling/queue.rs; defaults in lib/kv-router/src/scheduling/config.rs and the
// frontend's --router-queue-threshold):
//   a worker is busy while its active prefill tokens (the router's own accounting, DynamoLoad) exceed
//   router_queue_threshold × its max_num_batched_tokens, threshold 16.0;
//   a request arriving while every worker is busy waits in the router's queue, FCFS
//   (router_queue_policy fcfs), unbounded (router_queue_by_incoming_missing_isl unset), with no timeout;
//   the queue is drained, head first, whenever a worker's prefill load drops (a first token, an end) and
//   stops again while every worker is busy.
// The worker busy thresholds that answer 529 (active_decode_blocks_threshold, active_prefill_tokens_threshold,
// active_prefill_tokens_threshold_frac) are unset by default: nothing is ever rejected.
// max_num_batched_tokens is what the worker publishes in its runtime config: the engine profile's.
// Thread: the run's. Hot path: one pass over the pool's workers per arrival and per drain step.
import type { AdmissionDone, AdmissionRequest, RouteStep } from '../../../src/admission/types.ts';
import type { DynamoLoad } from '../../../src/router/policies/dynamo.ts';
import type { FleetView } from '../../../src/router/types.ts';
import type { Clock } from '../../../src/util/clock.ts';
import type { NativeAdmission } from './types.ts';

export const DYNAMO_QUEUE_THRESHOLD = 16;

interface Waiting {
  req: AdmissionRequest;
  done: AdmissionDone;
  arrivedMs: number;
}

export class DynamoRouterQueue implements NativeAdmission {
  readonly description: string;
  private readonly fleet: FleetView;
  private readonly router: RouteStep;
  private readonly clock: Clock;
  private readonly load: DynamoLoad;
  private readonly busyTokens: number;
  private readonly queue: Waiting[] = [];
  private head = 0;
  private pumpScheduled = false;
  /** Requests that waited in the queue (for tests and the run's notes). */
  queued = 0;

  get interventions(): number {
    return this.queued;
  }

  constructor(o: { fleet: FleetView; router: RouteStep; clock: Clock; load: DynamoLoad; maxNumBatchedTokens: number; threshold?: number }) {
    this.fleet = o.fleet;
    this.router = o.router;
    this.clock = o.clock;
    this.load = o.load;
    const threshold = o.threshold ?? DYNAMO_QUEUE_THRESHOLD;
    this.busyTokens = threshold * o.maxNumBatchedTokens;
    this.description = `Dynamo router queue: requests wait (FCFS, unbounded) while every worker has more than ${threshold} x max_num_batched_tokens (${this.busyTokens}) of active prefill tokens; nothing rejected`;
    // The scheduler re-checks its queue when a worker's load drops; the policy says when.
    o.load.onLoadDrop = () => this.schedulePump();
  }

  get depth(): number {
    return this.queue.length - this.head;
  }

  acquire(req: AdmissionRequest, done: AdmissionDone): void {
    if (this.depth === 0 && !this.allBusy(req.route.poolId)) {
      this.dispatch(req, done, 0);
      return;
    }
    this.queued++;
    this.queue.push({ req, done, arrivedMs: this.clock.now() });
  }

  /** An admitted request ended: its worker's load dropped. */
  released(_poolId: string, _tokens: number): void {
    this.schedulePump();
  }

  /** Every healthy worker of the pool is busy; false when it has none (routing then says why). */
  allBusy(poolId: string): boolean {
    const members = this.fleet.candidates(poolId);
    let checked = 0;
    for (let i = 0; i < members.length; i++) {
      const slot = members[i]!;
      if (!this.fleet.isHealthy(slot)) continue;
      checked++;
      if (this.load.activePrefillTokens(slot) <= this.busyTokens) return false;
    }
    return checked > 0;
  }

  private dispatch(req: AdmissionRequest, done: AdmissionDone, queuedMs: number): void {
    const r = this.router.route(req.route);
    if (r.ok) done({ kind: 'admitted', slot: r.slot, replicaId: r.replicaId, decision: r.decision, queuedMs });
    else done({ kind: 'unroutable', reason: r.reason, queuedMs });
  }

  /** Drains on the next tick: the load drop is reported from inside another request's event. */
  private schedulePump(): void {
    if (this.pumpScheduled || this.depth === 0) return;
    this.pumpScheduled = true;
    this.clock.setTimer(0, this.pump);
  }

  private readonly pump = (): void => {
    this.pumpScheduled = false;
    while (this.depth > 0) {
      const w = this.queue[this.head]!;
      if (this.allBusy(w.req.route.poolId)) return;
      this.head++;
      this.dispatch(w.req, w.done, this.clock.now() - w.arrivedMs);
      if (this.head >= 1024 && this.head * 2 >= this.queue.length) {
        this.queue.splice(0, this.head);
        this.head = 0;
      }
    }
    this.queue.length = 0;
    this.head = 0;
  };
}
