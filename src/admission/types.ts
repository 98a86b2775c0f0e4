// The admission controller's contracts: what a caller asks (AdmissionRequest), what it gets back
// (AdmissionOutcome), and the few things the controller reads or calls (a router, a metrics sink). The gateway
// passes its Router and GatewayMetrics; the fleet simulator passes the same Router over simulated replicas and
// a virtual Clock, so the controller runs unchanged in both. Nothing here knows about HTTP.
// Thread: the acceptor. Types only.
import type { GatewayConfig, TenantConfig } from '../config/schema.ts';
import type { Rejection } from '../errors/rejection.ts';
import type { RouteResult } from '../router/route.ts';
import type { Decision, FleetView, RouteRequest } from '../router/types.ts';
import type { GpuTimeModel } from '../gpu-time/gpu-time-model.ts';
import type { Clock } from '../util/clock.ts';
import type { PoolBudgetReader } from './pool-budget.ts';

export type SlaTier = TenantConfig['sla_tier'];
export type AdmissionConfig = GatewayConfig['admission'];

export interface AdmissionRequest {
  /** What the router needs; `route.excluded` lists replicas earlier attempts of this request tried. */
  readonly route: RouteRequest;
  /** Sequences asked for (`n`): the reservation is prompt + max_tokens × n. */
  readonly n: number;
  readonly tier: SlaTier;
  /** The pool's configured block size, to turn the decision's cached blocks into tokens. */
  readonly blockSize: number;
  /** Which request field holds the prompt, for a context_length_exceeded error (`messages` or `prompt`). */
  readonly promptParam: 'messages' | 'prompt' | 'input';
}

/** Why a request's targets are out of reach on an idle replica (reach.ts): the pool's own step, or its own size. */
export type InfeasibleReason = 'step_time' | 'prompt_length';

/** Why a request was refused with server_overloaded (the shed counter's reason, the log line's detail). */
export type ShedReason = 'queue_full' | 'wait_exceeds_deadline' | 'deadline_passed' | 'slo_unreachable' | 'queue_missing';

export type AdmissionOutcome =
  /** Route to `slot` now. The caller records its dispatch (ledger.dispatch) before `done` returns. */
  | { readonly kind: 'admitted'; readonly slot: number; readonly replicaId: string; readonly decision: Decision; readonly queuedMs: number }
  /** Answer with `rejection` (429 server_overloaded with Retry-After, or 400 context_length_exceeded). */
  | { readonly kind: 'rejected'; readonly rejection: Rejection; readonly shed: ShedReason | null; readonly queuedMs: number }
  /** The router found nothing: no healthy replica in the pool, or every one was tried by earlier attempts. */
  | { readonly kind: 'unroutable'; readonly reason: 'no_healthy_replica' | 'all_tried'; readonly queuedMs: number }
  /** cancel() was called while the request waited. */
  | { readonly kind: 'cancelled'; readonly queuedMs: number };

export type AdmissionDone = (o: AdmissionOutcome) => void;

/** The router as admission uses it: route decisions are made at dispatch time, so admission calls it. */
export interface RouteStep {
  route(req: RouteRequest): RouteResult;
}

/** Counts of decisions per pool (GatewayMetrics.admission implements it). */
export interface AdmissionMetrics {
  admission(pool: string, result: 'admitted' | 'queued' | 'shed'): void;
  /** A 429 server_overloaded: decided at arrival, or after waiting in the queue (its deadline passed). */
  shed(pool: string, when: 'arrival' | 'queued'): void;
  /** A request whose tier's targets are out of reach even on an idle replica (reach.ts), whatever is decided. */
  infeasible?(pool: string, tier: SlaTier, reason: InfeasibleReason): void;
}

/** What every pool's controller shares; the mutable fields change on config reload. */
export interface AdmissionDeps {
  readonly fleet: FleetView;
  readonly budget: PoolBudgetReader;
  /** The gateway's GPU-time model (the Router feeds it). */
  readonly gpu: GpuTimeModel;
  readonly clock: Clock;
  readonly metrics: AdmissionMetrics | null;
  cfg: AdmissionConfig;
  router: RouteStep;
  /** upstream.connections_per_replica: this gateway's in-flight requests per replica never exceed it. */
  connectionsPerReplica: number;
  /** How often a non-empty queue re-reads the fleet (the registry's scrape interval), ms. */
  pollMs: number;
  readonly onCallbackError: (err: unknown) => void;
}

