// One request inside the simulated gateway, from arrival to its last token: the attempt it is on, its
// ledger entry and routing decision, and what the client saw (first token, tokens, when). It is also the
// engine's event sink for its current attempt, so the engine's events drive the same ledger and router
// feedback calls the gateway's relay makes.
// It is its current attempt's ledger entry too (InflightLedger.dispatchInto): a token's ledger update reads
// this object's fields, where a separate entry was one more cache miss per token (a fifth of the engine's
// step end in a round-robin run's profile).
// Thread: the run's. Hot path: onToken runs once per generated token (a ledger update and two stores).
import type { AdmissionOutcome, AdmissionRequest } from '../../src/admission/types.ts';
import type { LedgerEntry, LedgerReply } from '../../src/registry/inflight-ledger.ts';
import type { Decision, RouteRequest } from '../../src/router/types.ts';
import type { EngineRequestEvents } from '../../test/mock-replica/engine/types.ts';
import type { SimGateway } from './sim-gateway.ts';
import type { SimRequest } from './workload-types.ts';

/** What the run does when a request's attempt ends; implemented by the event loop. */
export interface RequestSink {
  now(): number;
  /** In-flight tokens (prompt + generated) per replica slot, across every gateway. */
  readonly inflightTokens: Float64Array;
  /** Admission's answer for the request's current attempt. */
  admitted(lr: LiveRequest, o: AdmissionOutcome): void;
  /** The attempt died before its first token (replica killed): route it again or give up. */
  retry(lr: LiveRequest): void;
  /** The request is over: completed (`finished`) or failed. */
  settle(lr: LiveRequest, finished: boolean): void;
}

export class LiveRequest implements EngineRequestEvents, LedgerEntry {
  readonly req: SimRequest;
  readonly gw: SimGateway;
  readonly measured: boolean;
  readonly route: RouteRequest;
  readonly admission: AdmissionRequest;
  /** Slots tried by earlier attempts (the route's `excluded`). */
  readonly excluded: number[] = [];
  private readonly sink: RequestSink;
  decision: Decision | null = null;
  /** The current attempt's slot (its decision's); the ledger entry's fields follow (InflightLedger.dispatchInto fills them). */
  slot = -1;
  ended = true;
  outputTokens = 0;
  expectTokens = 0;
  reserveTokens = 0;
  maxTokens = 0;
  reply: LedgerReply | null = null;
  sequences = 1;
  firstTokenSeen = false;
  promptTokens = 0;
  wholePrompt = 0;
  blocks = 0;
  /** The pool's block size (the ledger entry's too). */
  blockSize: number;
  attempts = 0;
  /** Tokens the current attempt reserved in admission (prompt + max_tokens), given back when it ends. */
  reserved = 0;
  /** Times admission shed it (a client retrying with --retry-shed comes back after Retry-After). */
  sheds = 0;
  /** Its final answer was a shed (429), not a failure. */
  shedLast = false;
  /** Its stream broke after the first token (the replica died): an error the client saw. */
  broken = false;
  dispatchMs = Number.NaN;
  firstTokenMs = Number.NaN;
  lastTokenMs = Number.NaN;
  tokens = 0;
  cachedTokens = 0;
  settled = false;

  constructor(sink: RequestSink, req: SimRequest, gw: SimGateway, poolId: string, blockSize: number, measured: boolean) {
    this.sink = sink;
    this.blockSize = blockSize;
    this.req = req;
    this.gw = gw;
    this.measured = measured;
    // The reply's length as this gateway's finished streams predict it; max_tokens only bounds it. A client
    // that sent none has the context's room as its cap.
    const capSent = req.promptTokens + req.maxTokens < gw.pool.maxModelLen;
    const tenant = req.origin === undefined ? null : tenantName(req.origin.tenant);
    const reply = gw.replies.forecast(poolId, 'chat', tenant, req.promptTokens, req.maxTokens, capSent);
    this.route = {
      poolId, adapter: req.adapter, promptTokens: req.promptTokens, maxTokens: req.maxTokens, reply,
      blockHashes: req.blockHashes, excluded: this.excluded,
    };
    // The workloads carry no SLA tier: every tenant is standard (the schema's default tier).
    this.admission = { route: this.route, n: 1, tier: 'standard', blockSize, promptParam: 'messages' };
  }

  /** Hashes of the full blocks the generated tokens completed after the prompt's (null when unknown). */
  private producedReplyHashes(): Float64Array | null {
    const all = this.req.replyHashes;
    if (all === null) return null;
    const bs = this.blockSize;
    const n = Math.floor((this.req.promptTokens + this.tokens) / bs) - Math.floor(this.req.promptTokens / bs);
    return n >= all.length ? all : all.subarray(0, n);
  }

  /** Admission's callback (bound once per request). */
  readonly onAdmission = (o: AdmissionOutcome): void => {
    this.sink.admitted(this, o);
  };

  onFirstToken(info: { cachedTokens: number }): void {
    const now = this.sink.now();
    this.firstTokenMs = now;
    this.cachedTokens = info.cachedTokens;
    this.gw.ledger.firstToken(this);
    this.gw.router.firstToken(this.route, this.decision!, now - this.dispatchMs);
  }

  onToken(_index: number): void {
    this.gw.ledger.tokens(this, 1);
    // The attempt's slot is its decision's (d.slot): the slot spares a load of the Decision per token.
    this.gw.router.tokensAt(this.slot);
    this.tokens++;
    this.sink.inflightTokens[this.slot]! += 1;
    this.lastTokenMs = this.sink.now();
  }

  onFinish(reason: 'stop' | 'length' | 'abort'): void {
    const sink = this.sink;
    sink.inflightTokens[this.slot]! -= this.req.promptTokens + this.tokens;
    const gw = this.gw;
    gw.ledger.end(this);
    gw.router.ended(this.route, this.decision!, this.tokens);
    if (reason === 'abort') {
      // Only a killed replica aborts in the simulator: the connection dropped. Before the first token the
      // gateway retries elsewhere; after it the client has a broken stream.
      gw.router.finished(this.route, this.decision!, null, null);
      gw.admission.released(this.route.poolId, this.reserved);
      if (Number.isNaN(this.firstTokenMs)) {
        this.excluded.push(this.slot);
        sink.retry(this);
      } else {
        this.broken = true;
        sink.settle(this, false);
      }
      return;
    }
    // A reply that finished teaches this gateway its length (a stream cut short above teaches nothing).
    gw.replies.finished(this.route.reply!, this.tokens);
    // The engine cached the reply's blocks under the conversation's chain (the spec's outputBlockHashes),
    // as vLLM caches a finished sequence; the gateway hashes the reply it relayed, every finished turn,
    // and reports the full blocks its tokens filled; not where the engine's KV events serve the router
    // (they report those blocks), as the live gateway (src/pipeline/upstream-attempt.ts).
    const d = this.decision!;
    gw.router.finished(this.route, d, this.cachedTokens, d.engineReportsReply ? null : this.producedReplyHashes());
    // Settled before admission pumps its queue, so the pump's dispatches see this request gone.
    sink.settle(this, true);
    gw.admission.released(this.route.poolId, this.reserved);
  }
}

/** Seed-mix tenants' names (one string per tenant index, made once). */
const TENANT_NAMES: string[] = [];
function tenantName(i: number): string {
  return TENANT_NAMES[i] ??= `tenant-${i}`;
}
