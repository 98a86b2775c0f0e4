// Config schema and defaults: the one source of truth for the YAML file's shape (see README "Configuration").
// Thread: main, setup only. Not on the hot path: parsed once at start and on reload, then frozen.
import { z } from 'zod';

const url = z.string().regex(/^https?:\/\/[^/\s]+$/, 'must be http(s)://host:port with no path');
const name = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._:-]*$/, 'letters, digits, . _ : - only');

export const replicaSchema = z.strictObject({
  id: name,
  url,
  /** LoRA adapters this replica can serve; when absent it serves every adapter of its pool. */
  adapters: z.array(name).optional(),
  /** Drained replicas take no new requests; in-flight ones finish. */
  drain: z.boolean().default(false),
  /** Weight for baseline policies; 0 takes it out of rotation. */
  weight: z.number().min(0).default(1),
  /** The replica's vLLM KV-event publisher (--kv-events-config endpoint), tcp://host:port; replay at port + 1. */
  kv_events: z.string().regex(/^tcp:\/\/[^/\s]+:\d+$/, 'must be tcp://host:port').optional(),
});

/**
 * What the kv-aware router predicts a replica of this pool costs (its own learned prefill rate replaces
 * prefill_tokens_per_second per replica as first tokens come back). Defaults: Llama 3.1 8B on one A100.
 * Decode step = decode_base_ms + decode_per_seq_ms × batch + decode_per_1k_kv_tokens_ms × KV tokens / 1000.
 */
export const engineSchema = z.strictObject({
  prefill_tokens_per_second: z.number().positive().default(12000),
  decode_base_ms: z.number().min(0).default(10.5),
  decode_per_seq_ms: z.number().min(0).default(0.025),
  decode_per_1k_kv_tokens_ms: z.number().min(0).default(0.085),
  /** Loading a LoRA adapter that is not resident into a GPU slot. */
  adapter_load_ms: z.number().min(0).default(40),
  /** A replica whose decode step would pass this once the request joins its batch is avoided. */
  tpot_target_ms: z.number().positive().default(50),
  /**
   * A replica whose predicted TTFT for the request passes max(ttft_target_ms, 1.25 × that request's own
   * prefill on an idle replica) is avoided; when no replica meets it, admission queues or sheds the request
   * instead of letting prefill queues grow on the GPUs (compute runs out before KV on prefill-heavy traffic).
   */
  ttft_target_ms: z.number().positive().default(400),
  /**
   * vLLM's --max-num-batched-tokens: each engine step carries every decoding sequence's token first and fills
   * the rest of this budget with prefill chunks (FCFS). The GPU-time model (src/gpu-time/) counts TTFT in such
   * steps. vLLM's default with chunked prefill on an A100 is 2,048.
   */
  max_num_batched_tokens: z.number().int().positive().default(2048),
  /**
   * Causal attention's quadratic share of prefill, in equivalent prefill tokens per (b² − a²) of a chunk
   * covering positions a..b: 2·d_model·layers / FLOPs per token. Llama 3.1 8B: 2·4096·32 / 14e9 ≈ 1.87e-5 (a
   * 15k-token prompt costs ~28 % more than its token count); 70B: 2·8192·80 / 140e9 ≈ 9.4e-6.
   */
  prefill_attention_coef: z.number().min(0).default(1.872e-5),
});

export const poolSchema = z.strictObject({
  id: name,
  model: name,
  aliases: z.array(name).default([]),
  /**
   * A built-in tokenizer, or `{ path: DIR }`: a Hugging Face tokenizer directory (tokenizer.json,
   * tokenizer_config.json, chat_template.jinja when the model ships one), as vLLM loads it for the model.
   */
  tokenizer: z.union([z.enum(['llama3', 'cl100k_base', 'o200k_base']), z.strictObject({ path: z.string().min(1) })]).default('llama3'),
  /**
   * `llama3.1` or `chatml` (built in), `auto` (the tokenizer directory's own template), or the path of a Jinja
   * template file. Default: `auto` with a `path` tokenizer, else `llama3.1`.
   */
  chat_template: z.string().min(1).optional(),
  max_context_tokens: z.number().int().positive().default(131072),
  block_size: z.number().int().positive().default(16),
  /** Default max_tokens charged to quota when the client does not send one. */
  default_max_tokens: z.number().int().positive().default(1024),
  /**
   * The median reply (tokens) assumed for this pool until its finished streams say otherwise: the prior of
   * the reply-length model (src/gpu-time/reply-length/), worth a few streams.
   */
  typical_reply_tokens: z.number().int().positive().default(256),
  adapters: z.array(name).default([]),
  /**
   * vLLM's LoRA int ids (lora_int_id, the order its --lora-modules load in, from 1) → adapter names, for KV events
   * of builds that send `lora_id` without `lora_name`: blocks of an id not mapped here are left out of the
   * events index, never taken as the base model's.
   */
  lora_ids: z.record(z.string().regex(/^[1-9][0-9]{0,9}$/, 'must be a LoRA int id (1, 2, …)'), name).default({}),
  /** At least one, except the pool an endpoint picker discovers through Kubernetes (epp.kubernetes; src/config/load.ts checks). */
  replicas: z.array(replicaSchema).default([]),
  /** Read only by `npm run fleet`: which mock profile and LoRA slots to give this pool's replicas. */
  mock_profile: z.enum(['llama-8b-a100', 'llama-70b-tp2-a100', 'tiny']).default('llama-8b-a100'),
  mock_max_loras: z.number().int().positive().optional(),
  engine: engineSchema.prefault({}),
}).superRefine((p, ctx) => {
  for (const [id, adapter] of Object.entries(p.lora_ids)) {
    if (!p.adapters.includes(adapter)) ctx.addIssue({ code: 'custom', path: ['lora_ids', id], message: `"${adapter}" is not in adapters` });
  }
}).transform((p) => ({ ...p, chat_template: p.chat_template ?? (typeof p.tokenizer === 'string' ? 'llama3.1' : 'auto') }));

const apiKey = z.union([
  z.strictObject({ sha256: z.string().regex(/^[0-9a-f]{64}$/, 'must be 64 lowercase hex digits') }),
  z.strictObject({ env: z.string().min(1) }),
]);

export const tenantSchema = z.strictObject({
  name,
  api_keys: z.array(apiKey).min(1),
  tokens_per_second: z.number().positive(),
  burst_tokens: z.number().int().positive(),
  max_inflight: z.number().int().positive(),
  sla_tier: z.enum(['premium', 'standard', 'batch']).default('standard'),
  /** Pools or models this tenant may use; empty means all. */
  allowed_models: z.array(name).default([]),
});

/**
 * Endpoint picker mode (src/epp/README.md): an Envoy ext_proc gRPC server that picks the replica of `pool` for
 * each request of a Gateway API Inference Extension gateway. Absent: off.
 */
export const eppSchema = z.strictObject({
  host: z.string().default('0.0.0.0'),
  /** GIE's conventional EPP port; 0 picks a free one (tests). */
  port: z.number().int().min(0).max(65535).default(9002),
  /** The pool (InferencePool) this picker serves: one picker, one pool (the protocol carries no pool id). */
  pool: name,
  /** A request body over this many bytes is answered 413 (GIE's reference picker buffers up to 10 MB). */
  max_body_bytes: z.number().int().positive().default(10 * 1024 * 1024),
  /** Endpoints after the primary in x-gateway-destination-endpoint, from the same ranking. */
  fallbacks: z.number().int().min(0).max(8).default(2),
  /** A request header naming the tenant (one Envoy sets, e.g. from its auth filter): that tenant's tier, models and quotas apply. */
  tenant_header: z.string().regex(/^[a-z0-9-]+$/, 'a lower-case header name').optional(),
  /** Discover the pool's replicas as the pods the Kubernetes API lists and watches, instead of `replicas`. */
  kubernetes: z.strictObject({
    namespace: z.string().min(1).default('default'),
    /** The InferencePool's selector, as a Kubernetes label selector (`app=vllm,tier=gpu`). */
    label_selector: z.string().min(1),
    /** The InferencePool's target port: replicas are http://POD_IP:target_port. */
    target_port: z.number().int().min(1).max(65535),
    /** Default: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT (in-cluster). */
    api_server: url.optional(),
    token_file: z.string().default('/var/run/secrets/kubernetes.io/serviceaccount/token'),
    ca_file: z.string().default('/var/run/secrets/kubernetes.io/serviceaccount/ca.crt'),
  }).optional(),
});

export const configSchema = z.strictObject({
  server: z.strictObject({
    host: z.string().default('127.0.0.1'),
    port: z.number().int().min(0).max(65535).default(8080),
    max_body_bytes: z.number().int().positive().default(4 * 1024 * 1024),
    /**
     * A request head (request line and fields) over this many bytes is answered 431 and its connection closed
     * (src/server/request-head.ts). uWS's own limits come first and are compiled into the binary: a head that
     * reaches the gateway in more than one socket read may hold 4 KiB, one that arrives in one read up to
     * uWS's 512 KiB read buffer, and at most 48 fields; past them uWS closes the connection without an answer.
     */
    max_header_bytes: z.number().int().min(1024).max(512 * 1024).default(16 * 1024),
    shutdown_grace_ms: z.number().int().min(0).default(30000),
    /** Acceptor threads, each a uWS app on the port (SO_REUSEPORT) running the whole request path (src/threads/README.md). */
    threads: z.number().int().min(1).max(64).default(1),
  }).prefault({}),
  upstream: z.strictObject({
    connect_timeout_ms: z.number().int().positive().default(2000),
    first_token_timeout_ms: z.number().int().positive().default(60000),
    max_attempts: z.number().int().min(1).max(10).default(3),
    /** Sockets per replica. Above vLLM's default max_num_seqs on every GPU (256 on A100, 1,024 on H100), so it never limits a batch: admission does (src/admission/README.md). */
    connections_per_replica: z.number().int().positive().default(1024),
    /** Whole-response deadline for non-streaming requests (their headers come only at the end). */
    request_timeout_ms: z.number().int().positive().default(600000),
    /**
     * A replica holding a request that has sent nothing to its client, whose engine token counters (scraped)
     * have not moved for this long, is judged stalled: those requests are retried elsewhere and it is held out
     * of routing until it moves (src/pipeline/stall-watch.ts). A prefill is counted only when it completes, so
     * this must outlast the longest one: 128k tokens at ~12k tokens/s on an A100 is ~11 s; 30 s leaves room for
     * a slower GPU or a queue. At least 2 × registry.scrape_interval_ms; 0 turns it off.
     */
    stall_timeout_ms: z.number().int().min(0).default(30000),
  }).prefault({}),
  tokenizer: z.strictObject({
    threads: z.number().int().min(0).max(64).default(1),
    /**
     * Uncached UTF-16 chars of the rendered chat segments (or the completion prompt's length) up to which a
     * prompt is tokenized inline on the acceptor; above it, in a worker. Break-even measured at 512-1,024
     * chars (npm run bench -- tokenize): a worker round trip costs the acceptor ~40-60 µs.
     */
    inline_max_chars: z.number().int().min(0).default(1024),
    cache_bytes: z.number().int().min(0).default(64 * 1024 * 1024),
  }).prefault({}),
  pools: z.array(poolSchema).min(1),
  tenants: z.array(tenantSchema).default([]),
  admission: z.strictObject({
    headroom_ratio: z.number().min(0).max(0.9).default(0.15),
    /** No request waits in the admission queue longer than this, whatever its tier (caps queue_ms_by_tier). */
    max_queue_ms: z.number().int().min(0).default(10000),
    /** Longest wait in the admission queue per SLA tier; the queue is ordered by the deadline this gives. */
    queue_ms_by_tier: z.strictObject({
      premium: z.number().int().min(0).default(1000),
      standard: z.number().int().min(0).default(2000),
      batch: z.number().int().min(0).default(10000),
    }).prefault({}),
    /** End-to-end allowance per tier: a request whose max_tokens × tpot_target_ms eats into it queues less. */
    end_to_end_ms_by_tier: z.strictObject({
      premium: z.number().int().positive().default(60000),
      standard: z.number().int().positive().default(120000),
      batch: z.number().int().positive().default(600000),
    }).prefault({}),
    /** The decode-step (TPOT) target: deadlines, and the drain-rate estimate before any request has completed. */
    tpot_target_ms: z.number().positive().default(50),
    /**
     * The TTFT each tier's requests are admitted against (prompts over 4,000 tokens: at least 1.25 × their
     * own TTFT on an idle replica). A request that no replica can start within it, queue wait included, is
     * shed at arrival. Premium and standard share the design's 400 ms p99 SLA; batch work may wait 10 s.
     */
    ttft_ms_by_tier: z.strictObject({
      premium: z.number().positive().default(400),
      standard: z.number().positive().default(400),
      batch: z.number().positive().default(10000),
    }).prefault({}),
    /**
     * Share of the TTFT budget, and of the pool's TPOT target, that a prediction must stay within for a request
     * to be admitted: the margins the model's error, step noise and later arrivals spend. Tuned on the seed
     * mix at 3× capacity, seed 1, 8B pool (src/admission/README.md); seed 1 is not among the race's default seeds.
     */
    ttft_margin: z.number().positive().max(1).default(0.5),
    tpot_margin: z.number().positive().max(1).default(0.6),
    max_queued_requests: z.number().int().min(0).default(1024),
    stale_ms: z.number().int().positive().default(5000),
  }).prefault({}),
  routing: z.strictObject({
    policy: z.enum(['kv-aware', 'round-robin', 'least-outstanding-tokens', 'llm-d', 'llm-d-precise', 'sglang', 'dynamo']).default('kv-aware'),
    params: z.record(z.string(), z.unknown()).default({}),
    /**
     * kv-aware, cold prompts (no replica holds more than cold_prefix_blocks of it): no replica takes one past
     * (1 + ε) × its pool's mean in-flight tokens (idle ones always may) while one within it can serve it in time.
     */
    load_bound_epsilon: z.number().min(0).default(0.25),
    /** kv-aware, warm prompts: the same bound with this ε (looser: TTFT and fit weigh their load; src/router/README.md). */
    warm_load_bound_epsilon: z.number().min(0).default(1),
    /** Prefix index entries (136 bytes each, shared by every acceptor thread). */
    prefix_index_entries: z.number().int().min(8).default(1_048_576),
    /**
     * `events`: replicas with `kv_events` are predicted from their engines' KV events (exact), falling back to
     * the approximate index while a stream is silent, broken or resyncing. Read at start.
     */
    prefix_index: z.enum(['approximate', 'events']).default('approximate'),
    /** Hash entries of the events-fed index (48 bytes each at 256 slots, shared by every thread). Read at start. */
    kv_events_entries: z.number().int().min(8).default(1_048_576),
    /** A live stream with no batch for this many scrape intervals while its engine computed KV is silent. */
    kv_events_silence_scrapes: z.number().int().min(1).default(3),
    /** A prefix match of at most this many blocks (the chat template's opening) counts as cold. */
    cold_prefix_blocks: z.number().int().min(0).default(2),
    /** Cold placement hashes block min(cold_key_block, last full block) of the prompt (0-based). */
    cold_key_block: z.number().int().min(0).default(4),
  }).prefault({}),
  registry: z.strictObject({
    scrape_interval_ms: z.number().int().positive().default(100),
    scrape_timeout_ms: z.number().int().positive().default(1000),
    down_after_failures: z.number().int().positive().default(2),
    /** GET /health on every Nth scrape only (the /metrics scrape already proves the server answers); ~30 % less poller CPU at 5. */
    health_every_scrapes: z.number().int().positive().default(1),
    max_replicas: z.number().int().positive().default(256),
  }).prefault({}),
  quota: z.strictObject({
    backend: z.enum(['memory', 'redis']).default('memory'),
    /** One Redis URL, or several comma-separated cluster nodes (src/quota/redis-endpoint.ts has the syntax). */
    redis_url: z.string().optional(),
    /** Redis Cluster seed nodes as host:port (instead of redis_url); one reachable seed finds the rest. */
    redis_cluster: z.array(z.string()).optional(),
    failure_mode: z.enum(['open', 'closed']).default('open'),
    timeout_ms: z.number().int().positive().default(50),
    /** A crashed gateway's concurrency leases free this long after its last renewal (live ones renew every ttl/3). */
    lease_ttl_ms: z.number().int().positive().default(60000),
    /** Gateways sharing the tenants: while Redis is down and failing open, each admits 1/N of every limit. */
    expected_gateways: z.number().int().positive().default(1),
    key_prefix: z.string().default('gw'),
  }).prefault({}),
  usage: z.strictObject({
    sinks: z.array(z.string().regex(/^(jsonl:.+|redis-stream:.+)$/, 'must be jsonl:PATH or redis-stream:KEY')).default([]),
  }).prefault({}),
  metrics: z.strictObject({
    /** Tenants that get their own label value; every other tenant is reported as "other". */
    tenant_labels: z.array(name).default([]),
  }).prefault({}),
  /**
   * OpenTelemetry traces (src/tracing/README.md). Every field overrides its standard OTEL_ environment variable;
   * absent, the environment decides (off unless an OTLP endpoint is set). Read at start.
   */
  tracing: z.strictObject({
    enabled: z.boolean().optional(),
    /** OTLP/HTTP traces URL, used as is (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT). */
    traces_endpoint: z.string().regex(/^https?:\/\/[^/\s]+(\/\S*)?$/, 'must be an http(s):// URL').optional(),
    protocol: z.enum(['http/protobuf', 'http/json']).optional(),
    service_name: z.string().min(1).optional(),
    sampler: z.enum(['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio']).optional(),
    sampler_arg: z.number().min(0).max(1).optional(),
    resource_attributes: z.record(z.string().min(1), z.string()).optional(),
  }).optional(),
  expose_route_header: z.boolean().default(false),
  epp: eppSchema.optional(),
  /** Browser origins allowed to call the gateway (CORS); none by default. "*" allows every origin. */
  cors: z.strictObject({
    allowed_origins: z.array(z.union([
      z.literal('*'),
      z.string().regex(/^https?:\/\/[^/\s]+$/, 'must be "*" or scheme://host[:port] with no path'),
    ])).default([]),
    /** Access-Control-Max-Age of preflight answers: how long a browser may reuse one. */
    max_age_seconds: z.number().int().min(0).max(86400).default(600),
  }).prefault({}),
});

export type GatewayConfig = z.output<typeof configSchema>;
export type PoolConfig = z.output<typeof poolSchema>;
export type EngineConfig = z.output<typeof engineSchema>;
export type ReplicaConfig = z.output<typeof replicaSchema>;
export type TenantConfig = z.output<typeof tenantSchema>;
export type EppConfig = z.output<typeof eppSchema>;
