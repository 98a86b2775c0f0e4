// Shared rig for the faults-under-load tests: a small fleet of mock replica processes (so one can be
// SIGKILLed), a real gateway in front of them, a burst of concurrent requests with their own request ids,
// and the checks every fault must pass: what each client saw (a complete answer, or a stream that had
// started and ends with exactly one error event and no [DONE]), one usage record per request, the tenant's
// quota settled exactly once (no lease held, the bucket down by exactly what the replicas used), the
// gateway's in-flight count and the in-flight ledger back to zero.
// Thread: main (test process). Real HTTP over loopback everywhere.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { LEDGER_OUTPUT_TOKENS } from '../../../src/registry/inflight-ledger.ts';
import { spawnMockReplica, startMockReplica, type SpawnedReplica } from '../../helpers/mock-replicas.ts';
import { ALPHA_KEY, startStack, waitFor, type StackOptions, type TestStack } from '../../helpers/start-gateway.ts';

export const MODEL = 'llama-3.1-8b-instruct';
/** tiny profile, with room for every stream of a burst on one replica (KV and batch). */
export const MOCK_ARGS = ['--model', MODEL, '--profile', 'tiny', '--num-gpu-blocks', '4096', '--max-num-seqs', '64'];
/** The alpha tenant's bucket refills at 1 token/s, so after a burst it shows exactly what was charged. */
export const BURST_TOKENS = 10_000_000;

export interface FleetReplica {
  url: string;
  /** Set for a replica running as its own process (one a test can SIGKILL). */
  process: SpawnedReplica | null;
}

export interface Fleet {
  stack: TestStack;
  replicas: FleetReplica[];
  /** Gateway replica ids, in the order of `replicas`. */
  ids: string[];
  close(): Promise<void>;
}

/**
 * `processes` replicas as child processes first, then `inProcess` in this process (cheaper to start on a
 * loaded machine; a fault flag acts the same on both).
 */
export async function startFleet(shape: { processes?: number; inProcess?: number }, opts: StackOptions = {}): Promise<Fleet> {
  const replicas: FleetReplica[] = [];
  const closers: Array<() => Promise<void>> = [];
  const stopAll = (): Promise<unknown> => Promise.all(closers.map((c) => c()));
  try {
    for (let i = 0; i < (shape.processes ?? 0); i++) {
      const p = await spawnMockReplica(MOCK_ARGS);
      closers.push(() => p.kill('SIGKILL'));
      replicas.push({ url: p.url, process: p });
    }
    for (let i = 0; i < (shape.inProcess ?? 0); i++) {
      const r = await startMockReplica({ model: MODEL, profile: 'tiny', numGpuBlocks: 4096, maxNumSeqs: 64 });
      closers.push(() => r.close());
      replicas.push({ url: r.url, process: null });
    }
  } catch (err) {
    await stopAll();
    throw err;
  }
  let stack: TestStack;
  try {
    stack = await startStack({
      pools: [{ id: '8b', model: MODEL, aliases: ['gpt-fast'], replicas: [] }],
      externalReplicas: { '8b': replicas.map((r) => r.url) },
      ...opts,
      config: {
        routing: { policy: 'round-robin' },
        // A non-streamed answer is one block at the end, so silence is only cut by request_timeout_ms: short
        // here so a hung replica costs seconds, not the default ten minutes.
        upstream: { connect_timeout_ms: 1000, first_token_timeout_ms: 3000, request_timeout_ms: 4000, max_attempts: 3 },
        registry: { scrape_interval_ms: 50, scrape_timeout_ms: 2000, down_after_failures: 2 },
        tenants: [{ name: 'alpha', api_keys: [{ sha256: createHash('sha256').update(ALPHA_KEY).digest('hex') }], tokens_per_second: 1, burst_tokens: BURST_TOKENS, max_inflight: 256 }],
        ...opts.config,
      },
    });
  } catch (err) {
    await stopAll();
    throw err;
  }
  return {
    stack, replicas, ids: replicas.map((_, i) => `8b-x${i + 1}`),
    async close() {
      await stack.close();
      await stopAll();
    },
  };
}

export async function setFault(url: string, spec: Record<string, unknown>): Promise<void> {
  const res = await fetch(`${url}/_mock/faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(spec) });
  assert.equal(res.status, 200);
}

export interface Seen {
  id: string;
  stream: boolean;
  status: number;
  /** The replica that answered (x-gateway-route), '' before headers. */
  replica: string;
  text: string;
  /** Content chunks received (streams). */
  contentFrames: number;
  errorEvents: number;
  done: boolean;
  /** Set when the response headers arrive (for a stream: with its first token). */
  started: Promise<void>;
  finished: Promise<void>;
}

/** One request, read as it arrives; never rejects (a transport error leaves status 0). */
export function send(url: string, id: string, stream: boolean, maxTokens: number): Seen {
  let markStarted!: () => void;
  const seen: Seen = {
    id, stream, status: 0, replica: '', text: '', contentFrames: 0, errorEvents: 0, done: false,
    started: new Promise((r) => { markStarted = r; }), finished: Promise.resolve(),
  };
  seen.finished = (async () => {
    try {
      const res = await fetch(`${url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${ALPHA_KEY}`, 'content-type': 'application/json', 'x-request-id': id },
        body: JSON.stringify({ model: 'gpt-fast', messages: [{ role: 'user', content: `faults under load ${id}` }], max_tokens: maxTokens, ignore_eos: true, stream }),
      });
      seen.status = res.status;
      seen.replica = /replica=([^;]+)/.exec(res.headers.get('x-gateway-route') ?? '')?.[1] ?? '';
      markStarted();
      seen.text = await res.text();
    } catch (err) {
      seen.text += `\n[transport error: ${(err as Error).message}]`;
    } finally {
      markStarted();
    }
    const frames = seen.text.split('\n\n').filter((f) => f.startsWith('data: '));
    seen.contentFrames = frames.filter((f) => f.includes('"content":"') && !f.includes('"content":""')).length;
    seen.errorEvents = frames.filter((f) => f.startsWith('data: {"error"')).length;
    seen.done = frames.at(-1) === 'data: [DONE]';
  })();
  return seen;
}

/** `count` requests at once, a quarter of them not streamed. */
export function burst(url: string, prefix: string, count: number, maxTokens: number): Seen[] {
  return Array.from({ length: count }, (_, i) => send(url, `${prefix}-${i}`, i % 4 !== 3, maxTokens));
}

/**
 * Every answer complete, except streams that had started on a replica that then failed: those end with one
 * error event, after at least one token, and no [DONE]. Returns the cut ones.
 */
export function assertAnswers(seen: readonly Seen[], maxTokens: number): Seen[] {
  const cut: Seen[] = [];
  for (const s of seen) {
    assert.equal(s.status, 200, `${s.id}: every request that had no byte sent succeeds elsewhere: ${s.status} ${s.text.slice(0, 300)}`);
    if (!s.stream) {
      const body = JSON.parse(s.text) as { usage: { completion_tokens: number } };
      assert.equal(body.usage.completion_tokens, maxTokens, s.id);
      continue;
    }
    if (s.errorEvents === 0) {
      assert.ok(s.done, `${s.id}: a stream without an error event ends with [DONE]: …${s.text.slice(-200)}`);
      assert.equal(s.contentFrames, maxTokens, s.id);
      continue;
    }
    assert.equal(s.errorEvents, 1, `${s.id}: exactly one error event`);
    assert.ok(!s.text.includes('data: [DONE]'), `${s.id}: no [DONE] after an error event`);
    assert.ok(s.text.trimEnd().split('\n\n').at(-1)!.startsWith('data: {"error"'), `${s.id}: the error event is the last`);
    assert.ok(s.contentFrames >= 1, `${s.id}: only a stream that had started is cut`);
    cut.push(s);
  }
  return cut;
}

let probes = 0;
/** The alpha tenant's quota as a zero-cost acquire sees it (then settled): tokens left, leases free. */
export async function quotaNow(fleet: Fleet): Promise<{ tokens: number; freeLeases: number; maxInflight: number; atMs: number }> {
  const gw = fleet.stack.gateway;
  const limits = gw.services.auth.authenticate(`Bearer ${ALPHA_KEY}`)!.limits;
  const id = `probe-${++probes}`;
  const d = await gw.services.quota.acquire(limits, id, 0);
  await gw.services.quota.settle(limits, id, 0, 0);
  assert.ok(d.ok, 'the tenant is admitted');
  return { tokens: d.remainingTokens, freeLeases: d.remainingRequests + 1, maxInflight: limits.maxInflight, atMs: Date.now() };
}

/**
 * One usage record per request, the tenant's quota settled exactly once (`before`: quotaNow() taken before
 * the burst), nothing left in flight.
 */
export async function assertSettled(fleet: Fleet, seen: readonly Seen[], before: Awaited<ReturnType<typeof quotaNow>> | null): Promise<void> {
  const { stack } = fleet;
  const gw = stack.gateway;
  await waitFor(() => gw.inflightCount === 0, 5000);
  const records = await waitFor(async () => {
    const recs = (await stack.usage()).filter((r) => seen.some((s) => s.id === r.request_id));
    return recs.length >= seen.length ? recs : null;
  }, 5000);
  for (const s of seen) {
    const mine = records.filter((r) => r.request_id === s.id);
    assert.equal(mine.length, 1, `${s.id}: exactly one usage record`);
    const rec = mine[0]!;
    if (s.stream && s.errorEvents === 1) assert.equal(rec.output_tokens, s.contentFrames, `${s.id}: usage counts the tokens relayed`);
    else assert.equal(rec.status, 200, s.id);
  }
  // The bucket: down by exactly what replicas used (prompt + output of every request that got a token),
  // give or take its 1 token/s refill; a missing or doubled refund would be off by ~max_tokens per request.
  const used = records.reduce((a, r) => a + (r.ttft_ms !== null || r.status === 200 ? r.input_tokens + r.output_tokens : 0), 0);
  const now = await quotaNow(fleet);
  assert.equal(now.freeLeases, now.maxInflight, 'every lease released');
  if (before !== null) assertBucket(before, now, used);
  // The in-flight ledger: every per-replica figure of work in flight back to zero.
  const ledger = gw.registry.ledger;
  for (let slot = 0; slot < ledger.slots; slot++) {
    for (let f = 0; f <= LEDGER_OUTPUT_TOKENS; f++) assert.equal(ledger.get(slot, f), 0, `ledger slot ${slot} field ${f}`);
  }
}

type QuotaView = Awaited<ReturnType<typeof quotaNow>>;
function assertBucket(before: QuotaView, now: QuotaView, used: number): void {
  const refill = Math.ceil((now.atMs - before.atMs) / 1000) + 1;
  const expected = before.tokens - used;
  assert.ok(now.tokens >= expected - 1 && now.tokens <= expected + refill,
    `bucket ${now.tokens}, expected ${expected} (+ ≤ ${refill} refill): every reservation settled once`);
}
