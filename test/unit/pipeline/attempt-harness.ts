// Drives one UpstreamAttempt without a network: a real in-flight ledger, a Decision as a policy would fill
// it, routing feedback recorded in order, and an upstream whose dispatch() hands back a recording call; the
// test then plays the replica by calling the handler's onStart/onData/onEnd/onError. Thread: main (tests).
import { RequestContext } from '../../../src/pipeline/request-context.ts';
import type { AttemptPlan, ReplyHashing } from '../../../src/pipeline/upstream-attempt.ts';
import { UpstreamAttempt } from '../../../src/pipeline/upstream-attempt.ts';
import type { StallWatch } from '../../../src/pipeline/stall-watch.ts';
import { InflightLedger } from '../../../src/registry/inflight-ledger.ts';
import type { ClientSink } from '../../../src/relay/client-sink.ts';
import { Decision, type RouteRequest } from '../../../src/router/types.ts';
import type { AttemptOutcome } from '../../../src/upstream/retry-policy.ts';
import type { UpstreamCall } from '../../../src/upstream/upstream-client.ts';

export interface Harness {
  a: UpstreamAttempt;
  ctx: RequestContext;
  ledger: InflightLedger;
  /** Routing feedback in the order it came: 'dispatched', 'firstToken <ms>', 'finished <cached>'. */
  feedback: string[];
  call: UpstreamCall & { aborted: number; paused: number };
  outcome: Promise<AttemptOutcome>;
  /** Chunks that carried output tokens, as the router's `tokens` hook counted them (the GPU-time model's step ends). */
  tokenChunks: { n: number };
}

export function attemptHarness(sink: ClientSink, opts: { stream: boolean; promptTokens?: number; cachedBlocks?: number; firstTokenTimeoutMs?: number; replies?: ReplyHashing; stalls?: StallWatch }): Harness {
  const ctx = new RequestContext('rid', 'chat', sink, performance.now());
  ctx.stream = opts.stream;
  const ledger = new InflightLedger(1);
  const feedback: string[] = [];
  const tokenChunks = { n: 0 };
  const call = { aborted: 0, paused: 0, done: false, pause() { this.paused++; }, resume() {}, abort() { this.aborted++; } };
  const routeReq: RouteRequest = { poolId: 'p', adapter: null, promptTokens: opts.promptTokens ?? 40, maxTokens: 16, blockHashes: new Float64Array(2), excluded: [] };
  const plan: AttemptPlan = {
    request: { path: '/v1/chat/completions', body: '{}', headers: {}, headersTimeoutMs: 1000, bodyTimeoutMs: 1000 },
    routeReq,
    reservedOutputTokens: 16,
    blockSize: 16,
    firstTokenTimeoutMs: opts.firstTokenTimeoutMs ?? 60_000,
    ledger,
    router: {
      dispatched: (r) => { if (r === routeReq) feedback.push('dispatched'); },
      firstToken: (r, _d, ms) => { if (r === routeReq) feedback.push(`firstToken ${ms >= 0 ? 'ok' : 'negative'}`); },
      finished: (r, _d, cached, hashes) => { if (r === routeReq) feedback.push(`finished ${cached} ${hashes}`); },
      tokens: () => { tokenChunks.n++; },
      ended: () => undefined,
    },
    upstream: { dispatch: () => call },
    replies: opts.replies ?? null,
    stalls: opts.stalls ?? null,
  };
  const d = new Decision();
  d.slot = 0;
  d.cachedBlocks = opts.cachedBlocks ?? 0;
  const a = new UpstreamAttempt(ctx, plan, d, [['content-type', 'text/event-stream']]);
  const outcome = a.run('http://replica');
  return { a, ctx, ledger, feedback, call, outcome, tokenChunks };
}
