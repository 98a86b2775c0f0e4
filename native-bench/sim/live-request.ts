// One request inside the simulated gateway, from arrival to its last token: the attempt it is on, its
// ledger entry and routing decision, and what the client saw (first token, tokens, when). It is also the
// engine's event sink for its current attempt, so the engine's events drive the same ledger and router
// feedback calls the gateway's relay makes.
// Thread: the run's. Hot path: onToken runs once per generated token (a ledger update and two stores).
import type { LedgerEntry } from '../../src/registry/inflight-ledger.ts';
import type { Decision, RouteRequest } from '../../src/router/types.ts';
import type { EngineRequestEvents } from '../../test/mock-replica/engine/types.ts';
import type { SimGateway } from './sim-gateway.ts';
import type { SimRequest } from './workload-types.ts';

/** What the run does when a request's attempt ends; implemented by the event loop. */
export interface RequestSink {
  now(): number;
  /** In-flight tokens (prompt + generated) per replica slot, across every gateway. */
  readonly inflightTokens: Float64Array;
  /** The attempt died before its first token (replica killed): route it again or give up. */
  retry(lr: LiveRequest): void;
  /** The request is over: completed (`finished`) or failed. */
  settle(lr: LiveRequest, finished: boolean): void;
}

export class LiveRequest implements EngineRequestEvents {
  readonly req: SimRequest;
  readonly gw: SimGateway;
  readonly measured: boolean;
  readonly route: RouteRequest;
  /** Slots tried by earlier attempts (the route's `excluded`). */
  readonly excluded: number[] = [];
  private readonly sink: RequestSink;
  decision: Decision | null = null;
  entry: LedgerEntry | null = null;
  slot = -1;
  attempts = 0;
  dispatchMs = Number.NaN;
  firstTokenMs = Number.NaN;
  lastTokenMs = Number.NaN;
  tokens = 0;
  cachedTokens = 0;
  settled = false;

  constructor(sink: RequestSink, req: SimRequest, gw: SimGateway, poolId: string, measured: boolean) {
    this.sink = sink;
    this.req = req;
    this.gw = gw;
    this.measured = measured;
    this.route = {
      poolId, adapter: req.adapter, promptTokens: req.promptTokens, maxTokens: req.maxTokens,
      blockHashes: req.blockHashes, excluded: this.excluded,
    };
  }

  onFirstToken(info: { cachedTokens: number }): void {
    const now = this.sink.now();
    this.firstTokenMs = now;
    this.cachedTokens = info.cachedTokens;
    this.gw.ledger.firstToken(this.entry!);
    this.gw.router.firstToken(this.route, this.decision!, now - this.dispatchMs);
  }

  onToken(_index: number): void {
    this.gw.ledger.tokens(this.entry!, 1);
    this.tokens++;
    this.sink.inflightTokens[this.slot]! += 1;
    this.lastTokenMs = this.sink.now();
  }

  onFinish(reason: 'stop' | 'length' | 'abort'): void {
    const sink = this.sink;
    sink.inflightTokens[this.slot]! -= this.req.promptTokens + this.tokens;
    this.gw.ledger.end(this.entry!);
    if (reason === 'abort') {
      // Only a killed replica aborts in the simulator: the connection dropped. Before the first token the
      // gateway retries elsewhere; after it the client has a broken stream.
      this.gw.router.finished(this.route, this.decision!, null, null);
      if (Number.isNaN(this.firstTokenMs)) {
        this.excluded.push(this.slot);
        sink.retry(this);
      } else {
        sink.settle(this, false);
      }
      return;
    }
    // The engine cached the reply's blocks under the conversation's chain (the spec's outputBlockHashes),
    // as vLLM caches a finished sequence: the router learns them as the pipeline reports them.
    this.gw.router.finished(this.route, this.decision!, this.cachedTokens, this.req.replyHashes);
    sink.settle(this, true);
  }
}
