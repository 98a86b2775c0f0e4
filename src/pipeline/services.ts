// What the request pipeline needs from each stage, as structural interfaces, so main.ts can compose the real
// implementations (and tests can compose real ones with other settings). Thread: main. Setup only.
import type { AdmissionController } from '../admission/admission-controller.ts';
import type { GatewayConfig, TenantConfig } from '../config/schema.ts';
import type { QuotaStore, TenantLimits } from '../quota/types.ts';
import type { FleetView } from '../router/types.ts';
import type { Router } from '../router/route.ts';
import type { UpstreamClient } from '../upstream/upstream-client.ts';
import type { UsageRecorder } from '../usage/usage-recorder.ts';
import type { ReplyLengths } from '../gpu-time/reply-length/reply-lengths.ts';
import type { ReplyHashRequest } from '../tokenize/prompt-tokenizer.ts';
import type { ChatOptions } from '../tokenize/types.ts';
import type { ModelCatalog } from './model-catalog.ts';
import type { StallWatch } from './stall-watch.ts';
import type { ResponseOwners } from './response-owners.ts';
import type { ChatMessageIn } from './parse-body.ts';
import type { PoolConfig } from '../config/schema.ts';
import type { CancelPhase, QuotaResult, RequestOutcome, UpstreamErrorKind } from '../metrics/metrics.ts';
import type { RequestTracing } from '../tracing/request-tracing.ts';

export interface TenantIdentity {
  readonly name: string;
  readonly limits: TenantLimits;
  readonly slaTier: TenantConfig['sla_tier'];
  readonly allowedModels: readonly string[];
}

export interface AuthStage {
  authenticate(authorizationHeader: string | undefined): TenantIdentity | null;
}

export interface MeasuredPromptFigures {
  promptTokens: number;
  blockHashes: Float64Array;
  tailTokens?: Uint32Array;
  estimated?: string | null;
}

export interface TokenizeStage {
  /**
   * The prompt's count and block hashes: the value itself when it was computed inline (errors thrown), a
   * promise when a worker computes it (errors as rejections). The pipeline awaits only the promise.
   */
  measure(
    req: { pool: PoolConfig; kind: 'chat' | 'completion'; messages?: ChatMessageIn[]; tools?: unknown[] | null; chat?: ChatOptions | null; prompt?: string | number[]; adapter: string | null },
    signal?: AbortSignal,
  ): MeasuredPromptFigures | Promise<MeasuredPromptFigures>;
  /**
   * A finished reply's block hashes, continuing its prompt's chain (src/tokenize/reply-hashes.ts). Absent:
   * the routing policy never learns replies.
   */
  replyHashes?(req: ReplyHashRequest): Promise<Float64Array>;
}

export interface RegistryStage extends FleetView {
  /** -1 when no live member has this id. */
  slotOf(replicaId: string): number;
  replica(slot: number): { readonly id: string; readonly url: string; readonly draining: boolean; readonly adapters: readonly string[] | null };
  reportDataPlaneFailure(slot: number): void;
  reportDataPlaneSuccess(slot: number): void;
}

/** What the pipeline records; GatewayMetrics (src/metrics/metrics.ts) implements it and owns the types. */
export interface MetricsStage {
  requestEnded(o: RequestOutcome): void;
  quota(result: QuotaResult): void;
  routed(policy: string, replica: string, why?: string): void;
  retry(pool: string, kind: string): void;
  /** A chat prompt counted on an estimate because its template could not be rendered as vLLM renders it. */
  templateFallback?(pool: string, reason: string): void;
  upstreamError(kind: UpstreamErrorKind): void;
  cancelled(phase: CancelPhase, latencySeconds: number): void;
}

export interface LogStage {
  /** pino's: lets a caller skip building a line nobody will write (the per-request line is ~20 fields). */
  isLevelEnabled?(level: 'info' | 'warn' | 'error'): boolean;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

export interface Services {
  readonly cfg: GatewayConfig;
  readonly catalog: ModelCatalog;
  readonly auth: AuthStage;
  readonly quota: QuotaStore;
  readonly tokenizer: TokenizeStage;
  readonly registry: RegistryStage;
  readonly router: Router;
  /** Kept across config reloads (queued requests hold callbacks into it); reconfigured in place. */
  readonly admission: AdmissionController;
  /** Kept across config reloads: aborts attempts on a replica that shows no progress (stall-watch.ts); null: off. */
  readonly stalls?: StallWatch | null;
  readonly upstream: UpstreamClient;
  readonly usage: UsageRecorder;
  /** Kept across config reloads: which replica stored each Responses API response. */
  readonly responses: ResponseOwners;
  /**
   * Kept across config reloads: reply lengths learned from finished streams (src/gpu-time/reply-length/);
   * absent or null: no forecast, max_tokens is taken for each reply's length.
   */
  readonly replyLengths?: ReplyLengths | null;
  readonly metrics: MetricsStage | null;
  readonly log: LogStage;
  /** This thread's tracing; null or absent when off (decided at start: src/tracing/README.md). */
  readonly tracing?: RequestTracing | null;
}
