// Pipeline scenario (issue 3): what does the gateway's own request path cost in CPU, stage by stage, with the
// sockets taken away? The relay scenario measures whole processes, where a loopback send() also pays for the
// receiver's TCP processing and a shared 2-core machine moves every figure by 20-60 %; here the real stages
// (auth, body parse, model resolution, inline tokenization with its caches, the memory quota store, the
// round-robin router over a real in-flight ledger, UpstreamAttempt + the SSE relay, finishRequest with
// metrics and an empty usage recorder) run in one process against a fake upstream that answers from canned
// bytes (one SSE event per chunk, like vLLM) and a client sink that drops what it is given.
// Variants: `full`, then the same with one stage replaced by a constant (no metrics, noop quota, fixed
// tokenizer result): full minus a variant is that stage's cost. `frames` repeats `full` with 4x the output
// tokens: the slope is the relay's per-frame cost. Rounds alternate the variants' order.
// Allocation: bytes allocated per request = growth of the young generation (new space + new large objects)
// over a short run (--alloc-requests) in which no GC ran (a `gc` PerformanceObserver, and the young generation
// never shrinking between samples). It needs a young generation larger than that run allocates:
// `node --min-semi-space-size=256 --max-semi-space-size=256 --import tsx native-bench/run.ts pipeline`; otherwise the column says `gc`.
// Allocation sites (`--alloc-sites N`): V8's sampling heap profiler over the inspector, told to keep the
// samples of objects a GC already collected (includeObjectsCollectedByMinor/MajorGC), which is what garbage
// per request is made of; the notes list the N functions that allocate the most bytes per request (`full`).
// Thread: bench main thread. Run: `npm run bench -- pipeline [--requests N] [--rounds R] [--alloc-sites N]`.
import { Session } from 'node:inspector/promises';
import { PerformanceObserver } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { getHeapSpaceStatistics } from 'node:v8';
import type { BenchScenario } from '../types.ts';
import { AdmissionController } from '../../src/admission/admission-controller.ts';
import { hashApiKey, Authenticator } from '../../src/auth/authenticate.ts';
import { parseConfig } from '../../src/config/load.ts';
import type { GatewayConfig } from '../../src/config/schema.ts';
import { GatewayMetrics } from '../../src/metrics/metrics.ts';
import { handleCompletion, newContext } from '../../src/pipeline/handle-completion.ts';
import { ModelCatalog } from '../../src/pipeline/model-catalog.ts';
import { ResponseOwners } from '../../src/pipeline/response-owners.ts';
import type { RegistryStage, Services, TokenizeStage } from '../../src/pipeline/services.ts';
import { createQuotaStore } from '../../src/quota/create-quota-store.ts';
import type { QuotaDecision, QuotaStore } from '../../src/quota/types.ts';
import { InflightLedger } from '../../src/registry/inflight-ledger.ts';
import type { ClientSink, HeaderList } from '../../src/relay/client-sink.ts';
import { GpuTimeModel } from '../../src/gpu-time/gpu-time-model.ts';
import { KvEstimator } from '../../src/router/kv-estimate.ts';
import { Router, createPolicy } from '../../src/router/route.ts';
import { WallClock } from '../../src/util/clock.ts';
import { PromptTokenizer } from '../../src/tokenize/prompt-tokenizer.ts';
import type { UpstreamCall, UpstreamClient, UpstreamHandler, UpstreamRequest } from '../../src/upstream/upstream-client.ts';
import { UsageRecorder } from '../../src/usage/usage-recorder.ts';
import { chatBody } from '../load/openai-bodies.ts';
import { startTracing } from '../../src/tracing/request-tracing.ts';
import { startOtlpSink } from '../harness/otlp-sink.ts';

const API_KEY = 'sk-bench-pipeline';
const MODEL = 'llama-3.1-8b-instruct';

const CLIENT_TRACEPARENT = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';

function benchConfig(): GatewayConfig {
  return parseConfig(benchRaw());
}

function benchRaw(): Record<string, unknown> {
  return {
    server: { host: '127.0.0.1', port: 0 },
    routing: { policy: 'round-robin' },
    quota: { backend: 'memory', failure_mode: 'open' },
    usage: { sinks: [] },
    tokenizer: { threads: 0 },
    pools: [{ id: 'bench', model: MODEL, mock_profile: 'tiny', replicas: [{ id: 'r1', url: 'http://127.0.0.1:9' }, { id: 'r2', url: 'http://127.0.0.1:10' }] }],
    tenants: [{ name: 'bench', api_keys: [{ sha256: hashApiKey(API_KEY) }], tokens_per_second: 1e12, burst_tokens: 1e15, max_inflight: 1_000_000, sla_tier: 'premium' }],
  };
}

/** Two healthy replicas, a real ledger; nothing scraped. */
function fakeRegistry(cfg: GatewayConfig): RegistryStage {
  const replicas = cfg.pools[0]!.replicas.map((r) => ({ id: r.id, url: r.url, draining: false, adapters: null }));
  const slots = replicas.map((_, i) => i);
  return {
    candidates: () => slots,
    isHealthy: () => true,
    replica: (slot) => replicas[slot]!,
    slotOf: (id) => replicas.findIndex((r) => r.id === id),
    residentAdapters: () => [],
    // A fresh row with room to spare: admission admits every request at once, as an unloaded fleet would.
    readRow: (_slot, out) => {
      out.lastGoodScrapeMs = Date.now();
      out.numGpuBlocks = 100_000;
      out.blockSize = 16;
      out.kvUsage = 0;
      out.running = 0;
      out.waiting = 0;
      return true;
    },
    prefixAffinityOff: () => false,
    nowMs: () => Date.now(),
    ledger: new InflightLedger(replicas.length),
    reportDataPlaneFailure: () => undefined,
    reportDataPlaneSuccess: () => undefined,
  };
}

/** vLLM's event shapes (role chunk, one chunk per token, finish, usage, [DONE]), one Buffer per event. */
function streamChunks(tokens: number): Buffer[] {
  const id = 'chatcmpl-bench';
  const head = `{"id":"${id}","object":"chat.completion.chunk","created":1764486000,"model":"${MODEL}"`;
  const out = [`data: ${head},"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}\n\n`];
  for (let i = 0; i < tokens; i++) {
    const last = i === tokens - 1;
    out.push(`data: ${head},"choices":[{"index":0,"delta":{"content":" tok${i}"},"logprobs":null,"finish_reason":${last ? '"length","stop_reason":null' : 'null'}}]}\n\n`);
  }
  out.push(`data: ${head},"choices":[],"usage":{"prompt_tokens":21,"total_tokens":${21 + tokens},"completion_tokens":${tokens},"prompt_tokens_details":{"cached_tokens":16}}}\n\n`);
  out.push('data: [DONE]\n\n');
  return out.map((s) => Buffer.from(s));
}

function jsonBody(tokens: number): Buffer {
  return Buffer.from(JSON.stringify({
    id: 'chatcmpl-bench', object: 'chat.completion', created: 1764486000, model: MODEL,
    choices: [{ index: 0, message: { role: 'assistant', content: Array.from({ length: tokens }, (_, i) => ` tok${i}`).join('') }, logprobs: null, finish_reason: 'length', stop_reason: null }],
    usage: { prompt_tokens: 21, total_tokens: 21 + tokens, completion_tokens: tokens, prompt_tokens_details: { cached_tokens: 16 } },
  }));
}

/** Answers every dispatch from canned bytes on the microtask queue, as a socket read would, one chunk per event. */
class CannedUpstream {
  constructor(private readonly stream: Buffer[], private readonly json: Buffer) {}

  dispatch(_url: string, req: UpstreamRequest, handler: UpstreamHandler): UpstreamCall {
    const call: UpstreamCall = { done: false, pause() {}, resume() {}, abort() {} };
    const chunks = req.body.includes('"stream":true') ? this.stream : [this.json];
    queueMicrotask(() => {
      handler.onStart(200);
      for (let i = 0; i < chunks.length; i++) handler.onData(chunks[i]!);
      handler.onEnd();
    });
    return call;
  }
}

class DropSink implements ClientSink {
  aborted = false;
  started = false;
  bytes = 0;
  begin(_status: number, _headers: HeaderList): void { this.started = true; }
  write(chunk: Uint8Array | string): boolean { this.bytes += chunk.length; return true; }
  end(chunk?: Uint8Array | string): void { this.started = true; if (chunk !== undefined) this.bytes += chunk.length; }
  onDrain(): void {}
  setAbortHandler(): void {}
  cork(fn: () => void): void { fn(); }
}

const NOOP_DECISION: QuotaDecision = Object.freeze({ ok: true, degraded: false, limitTokens: 1e15, remainingTokens: 1e15, resetSeconds: 0, limitRequests: 1e6, remainingRequests: 1e6 });
// Synchronous, as the memory store is: `full − noop quota` is the store's own work, not an await's.
const noopQuota: QuotaStore = {
  acquire: () => Promise.resolve(NOOP_DECISION), settle: () => Promise.resolve(), close: () => Promise.resolve(),
  acquireNow: () => NOOP_DECISION, settleNow: () => undefined,
};
const fixedTokenizer: TokenizeStage = { measure: () => ({ promptTokens: 21, blockHashes: new Float64Array([1]) }) };
const silentLog = { info() {}, warn() {}, error() {} };

const pipeline: BenchScenario = async (args) => {
  const { values } = parseArgs({ args, options: { requests: { type: 'string', default: '40000' }, rounds: { type: 'string', default: '3' }, tokens: { type: 'string', default: '16' }, 'alloc-requests': { type: 'string', default: '2000' }, 'alloc-sites': { type: 'string', default: '0' } } });
  const allocRequests = Number(values['alloc-requests']);
  const requests = Number(values.requests);
  const rounds = Number(values.rounds);
  const tokens = Number(values.tokens);
  const cfg = benchConfig();
  const registry = fakeRegistry(cfg);
  const tokenizer = await PromptTokenizer.create(cfg.tokenizer, ['llama3']);
  const quota = await createQuotaStore(cfg.quota);
  const metrics = new GatewayMetrics(cfg, { listenToWorkers: false });
  const gpu = new GpuTimeModel(cfg.pools, registry, cfg.admission.stale_ms);
  const router = new Router(createPolicy(cfg, registry, undefined, gpu), registry, null, null, gpu);
  const admission = new AdmissionController({
    fleet: registry, kv: new KvEstimator(registry, registry.ledger.slots, cfg.admission.stale_ms), gpu, router, clock: WallClock,
    cfg: cfg.admission, connectionsPerReplica: cfg.upstream.connections_per_replica, pollMs: cfg.registry.scrape_interval_ms, metrics,
  });
  const base: Services = {
    cfg, catalog: new ModelCatalog(cfg), auth: new Authenticator(cfg.tenants, {}), quota, tokenizer, registry,
    router, admission,
    upstream: new CannedUpstream(streamChunks(tokens), jsonBody(tokens)) as unknown as UpstreamClient,
    usage: UsageRecorder.fromConfig(cfg), responses: new ResponseOwners(), metrics, log: silentLog,
  };
  // Tracing on: every request traced (always_on) from a client traceparent and exported over OTLP/protobuf to a
  // sink in this process (its HTTP handling is counted too: an upper bound of the gateway's share).
  const otlp = await startOtlpSink();
  const tracing = startTracing(parseConfig({ ...benchRaw(), tracing: { traces_endpoint: otlp.endpoint, sampler: 'always_on' } }), {}, () => undefined)!;
  // The sampler drops every trace: non-recording spans, the traceparent still propagated.
  const dropped = startTracing(parseConfig({ ...benchRaw(), tracing: { traces_endpoint: otlp.endpoint, sampler: 'always_off' } }), {}, () => undefined)!;
  const long: Services = { ...base, upstream: new CannedUpstream(streamChunks(tokens * 4), jsonBody(tokens * 4)) as unknown as UpstreamClient };
  const variants: Array<[string, Services]> = [
    ['full', base],
    [`full, ${tokens * 4} tokens`, long],
    ['no metrics', { ...base, metrics: null }],
    ['noop quota', { ...base, quota: noopQuota }],
    ['fixed tokenizer result', { ...base, tokenizer: fixedTokenizer }],
    // The same policy with a `finished` hook, as kv-aware has: the relay collects the reply text and the
    // tokenizer hashes its blocks after the response (negative full − variant: what learning replies costs).
    ['tracing on', { ...base, tracing }],
    ['tracing on, sampled out', { ...base, tracing: dropped }],
    ['policy learns replies', { ...base, router: new Router(Object.assign(Object.create(base.router.policy) as Services['router']['policy'], { finished() {} }), registry) }],
  ];
  const authorization = `Bearer ${API_KEY}`;
  const bodies = { stream: Buffer.from(chatBody({ model: MODEL, maxTokens: tokens, stream: true })), json: Buffer.from(chatBody({ model: MODEL, maxTokens: tokens, stream: false })) };

  async function run(svc: Services, body: Buffer, n: number): Promise<number> {
    const sink = new DropSink();
    const cpu0 = process.cpuUsage();
    for (let i = 0; i < n; i++) {
      sink.started = false;
      const ctx = newContext('chat', sink, undefined);
      if (svc.tracing != null) ctx.trace = svc.tracing.begin('chat', svc.router.policy.name, ctx.startedAt, CLIENT_TRACEPARENT, '');
      const tenant = svc.auth.authenticate(authorization);
      if (tenant === null) throw new Error('bench key refused');
      await handleCompletion(svc, ctx, { route: 'chat', tenant, body: Promise.resolve(body) });
      if (ctx.status !== 200) throw new Error(`bench request answered ${ctx.status} ${ctx.code}`);
      // Every request's awaits are microtasks: let timers and I/O run now and then (the span exporter's batches).
      if ((i & 63) === 63) await new Promise((r) => setImmediate(r));
    }
    const d = process.cpuUsage(cpu0);
    return (d.user + d.system) / n;
  }

  let gcs = 0;
  const gcObserver = new PerformanceObserver((list) => { gcs += list.getEntries().length; });
  gcObserver.observe({ entryTypes: ['gc'] });
  /** Bytes allocated per request over a run with no GC, or null when a GC ran (young generation too small). */
  const young = (): number => {
    let used = 0;
    for (const sp of getHeapSpaceStatistics()) if (sp.space_name === 'new_space' || sp.space_name === 'new_large_object_space') used += sp.space_used_size;
    return used;
  };
  async function allocation(svc: Services, body: Buffer): Promise<number | null> {
    await new Promise((r) => setTimeout(r, 20)); // let pending GC entries arrive
    const gc0 = gcs;
    const y0 = young();
    let last = y0;
    let shrank = false;
    for (let done = 0; done < allocRequests; done += 100) {
      await run(svc, body, 100);
      const y = young();
      if (y < last) shrank = true;
      last = y;
    }
    await new Promise((r) => setTimeout(r, 20));
    return gcs === gc0 && !shrank ? (last - y0) / allocRequests : null;
  }

  /** Bytes allocated per request by the functions that allocate most (self size, sampled every 128 bytes). */
  async function allocationSites(svc: Services, body: Buffer, top: number): Promise<string> {
    const session = new Session();
    session.connect();
    try {
      await session.post('HeapProfiler.startSampling', { samplingInterval: 128, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
      await run(svc, body, allocRequests);
      const { profile } = await session.post('HeapProfiler.stopSampling');
      const bytes = new Map<string, number>();
      const walk = (n: typeof profile.head): void => {
        const f = n.callFrame;
        const where = `${f.functionName || '(anonymous)'} ${f.url.replace(/^.*\/(src|node_modules)\//, '$1/')}`;
        bytes.set(where, (bytes.get(where) ?? 0) + n.selfSize);
        for (const c of n.children) walk(c);
      };
      walk(profile.head);
      const total = [...bytes.values()].reduce((a, b) => a + b, 0);
      const sites = [...bytes].sort((a, b) => b[1] - a[1]).slice(0, top).map(([w, b]) => `${w} ${(b / allocRequests).toFixed(0)} B`);
      return `${(total / allocRequests / 1024).toFixed(1)} KiB/req sampled; top: ${sites.join('; ')}`;
    } finally {
      session.disconnect();
    }
  }

  const results = new Map<string, number[]>();
  const allocs = new Map<string, number | null>();
  for (const mode of ['stream', 'json'] as const) {
    for (const [, svc] of variants) await run(svc, bodies[mode], Math.min(5000, requests)); // warm every path
    for (const [name, svc] of variants) allocs.set(`${mode}|${name}`, await allocation(svc, bodies[mode]));
    for (let r = 0; r < rounds; r++) {
      const order = r % 2 === 0 ? variants : [...variants].reverse();
      for (const [name, svc] of order) {
        const us = await run(svc, bodies[mode], requests);
        const key = `${mode}|${name}`;
        results.set(key, [...(results.get(key) ?? []), us]);
      }
    }
  }
  const siteNotes: string[] = [];
  const top = Number(values['alloc-sites']);
  if (top > 0) for (const mode of ['stream', 'json'] as const) siteNotes.push(`allocation sites, ${mode}, full: ${await allocationSites(base, bodies[mode], top)}`);
  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const rows: Array<Array<string | number>> = [];
  for (const mode of ['stream', 'json'] as const) {
    const full = median(results.get(`${mode}|full`)!);
    for (const [name] of variants) {
      const us = median(results.get(`${mode}|${name}`)!);
      const a = allocs.get(`${mode}|${name}`);
      rows.push([mode, name, us.toFixed(1), name === 'full' ? '-' : (full - us).toFixed(1), a === null || a === undefined ? 'gc' : (a / 1024).toFixed(1)]);
    }
  }
  const s = median(results.get('stream|full')!);
  const sl = median(results.get(`stream|full, ${tokens * 4} tokens`)!);
  gcObserver.disconnect();
  await Promise.all([tracing.shutdown(), dropped.shutdown()]);
  await Promise.all([tokenizer.close(), quota.close(), otlp.close()]);
  return {
    title: 'Pipeline: CPU per request of the gateway\'s own stages, in process, no sockets',
    columns: ['mode', 'variant', 'CPU µs/req', 'full − variant µs', 'KiB allocated/req'],
    rows,
    notes: [
      `${requests} sequential requests per run, ${rounds} rounds (medians), ${tokens} output tokens (${tokens + 3} SSE events); fake upstream answers on the microtask queue, client sink drops bytes`,
      `relay per SSE event (stream, ${tokens * 4} vs ${tokens} tokens): ${((sl - s) / (tokens * 3)).toFixed(2)} µs`,
      `tracing on: ${otlp.posts} OTLP exports, ${(otlp.bytes / 1e6).toFixed(1)} MB; its full − variant is negative: what tracing every request costs`,
      'full − variant: what that stage costs (the variant replaces it with a constant); for the 4x-tokens row it is negative: the extra frames, and for "policy learns replies" the reply text collected and hashed',
      `KiB allocated/req: heap growth over ${allocRequests} requests with no GC in between ('gc': one ran; start node with --min-semi-space-size=256 --max-semi-space-size=256)`,
      ...siteNotes,
    ],
  };
};

export default pipeline;
