// The main thread's metric families: names, help texts, label names and buckets, each defined exactly once.
// Thread: main, setup only (called once per GatewayMetrics). Bucket choices are explained in buckets.ts.
// Label values are never chosen here: binding.ts maps config onto bounded values and caches the children.
import { Counter, Histogram, type Registry } from 'prom-client';
import * as B from './buckets.ts';

export type Families = ReturnType<typeof defineFamilies>;

export function defineFamilies(reg: Registry) {
  const histogram = <L extends string>(name: string, help: string, labelNames: readonly L[], buckets: readonly number[]): Histogram<L> =>
    new Histogram({ name, help, labelNames, buckets: [...buckets], registers: [reg] });
  const counter = <L extends string>(name: string, help: string, labelNames: readonly L[]): Counter<L> =>
    new Counter({ name, help, labelNames, registers: [reg] });
  return {
    requests: counter('gateway_requests_total',
      'Completion requests finished, by route, pool, HTTP status and error code ("none" on success).', ['route', 'pool', 'status', 'code']),
    ttft: histogram('gateway_ttft_seconds',
      'Time from request received to first token sent to the client, by route, pool, tenant SLA tier and prompt size (short: up to 4,000 tokens, the SLA scope).',
      ['route', 'pool', 'tier', 'prompt'], B.TTFT_BUCKETS_SECONDS),
    tpot: histogram('gateway_tpot_seconds',
      'Mean time per output token after the first, per request.', ['pool'], B.TPOT_BUCKETS_SECONDS),
    duration: histogram('gateway_request_duration_seconds',
      'End-to-end request duration, received to last byte.', ['route', 'pool'], B.DURATION_BUCKETS_SECONDS),
    overhead: histogram('gateway_overhead_seconds',
      "The gateway's own time per request: duration minus time waiting on replicas and in the admission queue.", ['route'], B.OVERHEAD_BUCKETS_SECONDS),
    queueWait: histogram('gateway_queue_wait_seconds',
      'Time spent in the admission queue, for requests that reached admission.', ['pool'], B.QUEUE_WAIT_BUCKETS_SECONDS),
    cancelLatency: histogram('gateway_cancellation_latency_seconds',
      'Client disconnect to upstream work aborted, by the phase the request was in.', ['phase'], B.CANCEL_LATENCY_BUCKETS_SECONDS),
    tokens: counter('gateway_tokens_total',
      'Tokens by pool, tenant (configured tenants, else "other") and kind (input, output, cached).', ['pool', 'tenant', 'kind']),
    cancellations: counter('gateway_client_cancellations_total',
      'Requests the client abandoned before completion.', ['route', 'pool']),
    admission: counter('gateway_admission_decisions_total',
      'Admission decisions by pool and result (admitted, queued, shed).', ['pool', 'result']),
    sheds: counter('gateway_admission_sheds_total',
      'Admission sheds (429 server_overloaded) by pool and when: at arrival, or after waiting in the queue.', ['pool', 'when']),
    infeasible: counter('gateway_admission_infeasible_total',
      "Requests whose tier's targets are out of reach even on an idle replica (admitted best effort), by pool, tier and reason (step_time, prompt_length).",
      ['pool', 'tier', 'reason']),
    ttftPredictionError: histogram('gateway_ttft_prediction_error_ratio',
      "The GPU-time model's predicted TTFT at admission against the observed one (from dispatch), (predicted - observed) / observed.",
      ['pool'], B.TTFT_PREDICTION_ERROR_BUCKETS),
    quota: counter('gateway_quota_decisions_total', 'Quota decisions by result.', ['result']),
    upstreamErrors: counter('gateway_upstream_errors_total', 'Upstream failures by kind.', ['kind']),
    routing: counter('gateway_routing_decisions_total', 'Routing decisions by policy and chosen replica.', ['policy', 'replica']),
    routingWhy: counter('gateway_routing_why_total',
      'Routing decisions by policy and why (prefix, cold, load-bound, headroom, adapter, policy).', ['policy', 'why']),
    cacheError: histogram('gateway_predicted_cached_tokens_error',
      'Router-predicted minus replica-reported cached prompt tokens, per request the replica answered.', ['pool'], B.CACHE_ERROR_BUCKETS_TOKENS),
    prefixPredictionError: histogram('gateway_prefix_prediction_error_tokens',
      'Router-predicted minus replica-reported cached prompt tokens, per replica, per request the replica answered.',
      ['pool', 'replica'], B.CACHE_ERROR_BUCKETS_TOKENS),
    configReloads: counter('gateway_config_reloads_total',
      'Configuration reloads (SIGHUP or a changed file) by result: applied, or rejected (the running config kept).', ['result']),
    listenPauses: counter('gateway_listen_pauses_total',
      'Times a listen socket was closed because the process had no file descriptor left (it listens again once some are free).', []),
    templateFallback: counter('gateway_template_fallback_total',
      "Chat requests served on a token estimate because the pool's chat template could not be rendered as vLLM renders it, by pool and reason (unsupported, python_error, render_error, media_estimate).",
      ['pool', 'reason']),
    retries: counter('gateway_retries_total',
      'Upstream attempts retried (before the first token), by pool and failure kind.', ['pool', 'kind']),
  };
}
