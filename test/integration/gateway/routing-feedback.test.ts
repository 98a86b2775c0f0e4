// The routing feedback hooks, through the real Router in a real gateway in front of real mock replicas: a
// recording policy (first eligible replica, one predicted cached block) sees dispatched → firstToken →
// finished once per attempt, with the replica's reported cached tokens, and sees the in-flight ledger charged
// with the prompt less the predicted hit at dispatch. A retry after a replica's 5xx is two attempts.
import { test, before, after, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { ALPHA_KEY, startStack, type TestStack } from '../../helpers/start-gateway.ts';
import { LEDGER_DISPATCHED_BLOCKS, LEDGER_FIELDS, LEDGER_PREFILL_TOKENS } from '../../../src/registry/inflight-ledger.ts';
import type { Decision, FleetView, RouteRequest, RoutingFeedback, RoutingPolicy } from '../../../src/router/types.ts';

class RecordingPolicy implements RoutingPolicy, RoutingFeedback {
  readonly name = 'recording';
  events: string[] = [];
  /** Prefill tokens the ledger held on the slot when `dispatched` was called, and the request's prompt. */
  prefillAtDispatch: Array<{ prefill: number; promptTokens: number }> = [];
  private fleet: FleetView | null = null;

  pick(_req: RouteRequest, eligible: readonly number[], fleet: FleetView, out: Decision): number {
    this.fleet = fleet;
    out.slot = eligible[0]!;
    out.cachedBlocks = 1;
    return out.slot;
  }
  describe(): string {
    return '';
  }
  dispatched(slot: number, req: RouteRequest, d: Decision): void {
    assert.equal(d.slot, slot);
    this.events.push(`dispatched ${this.id(slot)}`);
    this.prefillAtDispatch.push({ prefill: this.fleet!.ledger.get(slot, LEDGER_PREFILL_TOKENS), promptTokens: req.promptTokens });
  }
  firstToken(slot: number, _req: RouteRequest, _d: Decision, ttftMs: number): void {
    assert.ok(ttftMs > 0 && ttftMs < 5000, `ttft ${ttftMs}`);
    this.events.push(`firstToken ${this.id(slot)}`);
  }
  finished(slot: number, _req: RouteRequest, _d: Decision, cachedTokens: number | null, _replyHashes: Float64Array | null): void {
    // The reply's hashes are checked in reply-routing.test.ts.
    this.events.push(`finished ${this.id(slot)} ${cachedTokens ?? 'unknown'}`);
  }
  private id(slot: number): string {
    return this.fleet!.replica(slot).id;
  }
}

const policy = new RecordingPolicy();
let stack: TestStack;

async function fault(replica: string, spec: Record<string, unknown>): Promise<void> {
  const res = await fetch(`${stack.replicas.get(replica)!.url}/_mock/faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(spec) });
  assert.equal(res.status, 200);
}

/** The answer, and the cached prompt tokens its usage reports (0 when it has no prompt_tokens_details). */
async function chat(content: string, stream: boolean): Promise<{ status: number; text: string; cached: number }> {
  const res = await fetch(`${stack.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ALPHA_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt-fast', messages: [{ role: 'user', content }], max_tokens: 4, stream, ...(stream ? { stream_options: { include_usage: true } } : {}) }),
  });
  const text = await res.text();
  const usageJson = stream ? text.split('\n\n').find((e) => e.includes('"usage":{'))?.slice('data: '.length) : text;
  const usage = (JSON.parse(usageJson ?? '{}') as { usage?: { prompt_tokens_details?: { cached_tokens?: number } | null } }).usage;
  return { status: res.status, text, cached: usage?.prompt_tokens_details?.cached_tokens ?? 0 };
}

function ledgerIdle(): void {
  const ledger = stack.gateway.registry.ledger;
  for (let slot = 0; slot < ledger.slots; slot++) {
    for (let f = 0; f < LEDGER_FIELDS; f++) if (f !== LEDGER_DISPATCHED_BLOCKS) assert.equal(ledger.get(slot, f), 0, `slot ${slot} field ${f} released`);
  }
}

before(async () => {
  stack = await startStack({
    routingPolicy: () => policy,
    config: { registry: { scrape_interval_ms: 50, scrape_timeout_ms: 2000, down_after_failures: 50 } },
  });
});

beforeEach(async () => {
  await fault('8b-1', { mode: 'none' });
  policy.events = [];
  policy.prefillAtDispatch = [];
});

after(async () => {
  await stack.close();
});

const PROMPT = 'The quick brown fox jumps over the lazy dog. '.repeat(12);

test('a stream: dispatched, first token, finished with the cached tokens the replica reported', async () => {
  const first = await chat(PROMPT, true);
  assert.equal(first.status, 200);
  assert.deepEqual(policy.events, ['dispatched 8b-1', 'firstToken 8b-1', `finished 8b-1 ${first.cached}`]);
  // The same prompt again on the same replica: its prefix cache now holds it, and the replica says so.
  const again = await chat(PROMPT, true);
  assert.equal(again.status, 200);
  assert.ok(again.cached > first.cached, `cached ${again.cached} after ${first.cached}`);
  assert.deepEqual(policy.events.slice(3), ['dispatched 8b-1', 'firstToken 8b-1', `finished 8b-1 ${again.cached}`]);
  for (const { prefill, promptTokens } of policy.prefillAtDispatch) {
    assert.ok(promptTokens > 16);
    assert.equal(prefill, promptTokens - 16, 'the ledger charges the prompt less the predicted cached block');
  }
  ledgerIdle();
});

test('a non-streaming request: its body is the first token', async () => {
  const res = await chat('a short question', false);
  assert.equal(res.status, 200);
  assert.deepEqual(policy.events, ['dispatched 8b-1', 'firstToken 8b-1', `finished 8b-1 ${res.cached}`]);
  ledgerIdle();
});

test('a 5xx before the first token: the first attempt finishes without a first token, the retry completes', async () => {
  await fault('8b-1', { mode: 'error_before_first_token', status: 500 });
  const res = await chat('retry me', true);
  assert.equal(res.status, 200);
  assert.ok(res.text.endsWith('data: [DONE]\n\n'));
  assert.deepEqual(policy.events, ['dispatched 8b-1', 'finished 8b-1 unknown', 'dispatched 8b-2', 'firstToken 8b-2', `finished 8b-2 ${res.cached}`]);
  ledgerIdle();
});
