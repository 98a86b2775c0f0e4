// What every attempt of one request shares (AttemptPlan, built once per request by dispatch.ts's UpstreamJob)
// and the two hooks an attempt calls when its reply is complete. Types only.
import type { InflightLedger } from '../registry/inflight-ledger.ts';
import type { Router } from '../router/route.ts';
import type { RouteRequest } from '../router/types.ts';
import type { UpstreamClient, UpstreamRequest } from '../upstream/upstream-client.ts';
import type { StallWatch } from './stall-watch.ts';

/** What every attempt of one request shares; built once per request (UpstreamJob, dispatch.ts). */
export interface AttemptPlan {
  readonly request: UpstreamRequest;
  /** The request as the router saw it; the feedback hooks get the same object. */
  readonly routeReq: RouteRequest;
  /** max_tokens × n: the most the ledger ever counts for the reply (routeReq.reply, when given, is its forecast). */
  readonly reservedOutputTokens: number;
  /** Sequences asked for (n; absent: 1): the forecast is per sequence. */
  readonly sequences?: number;
  /** The pool's KV block size: the router's cached blocks become cached prompt tokens with it. */
  readonly blockSize: number;
  readonly firstTokenTimeoutMs: number;
  readonly ledger: InflightLedger;
  readonly router: Pick<Router, 'dispatched' | 'firstToken' | 'tokens' | 'ended' | 'finished'>;
  readonly upstream: Pick<UpstreamClient, 'dispatch'>;
  /** Hashes finished replies for the router; null or absent when its policy does not take them (setup). */
  readonly replies?: ReplyHashing | null;
  /** A Responses API request the replica stores: told the id and output of the response it produced. */
  readonly stored?: StoredResponses | null;
  /** Watches the attempt until its first byte to the client (stall-watch.ts); null or absent: not watched. */
  readonly stalls?: StallWatch | null;
}

/** Remembers which replica stored a Responses API response (src/pipeline/response-owners.ts). */
export interface StoredResponses {
  produced(replicaId: string, id: string, outputTexts: string[]): void;
}

/** A finished reply's block hashes, continuing the request's prompt chain (src/tokenize/reply-hashes.ts). */
export interface ReplyHashing {
  hash(text: string, finishReason: 'stop' | 'length'): Promise<Float64Array>;
}
