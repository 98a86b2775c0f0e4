// An explicit list of chat requests run through the simulator: the messages are tokenized and block-hashed
// with the gateway's own tokenizer, chat template and hasher (what the mock replica does with the same
// body), so a list sent live to mock replicas and run here puts the same prompts, with the same block
// hashes, into the same MockEngine model. Every request is measured (no warm-up). The fidelity check
// (README "Fidelity check") compares the two.
// Thread: the run's. Setup is one tokenization per request; the run is FleetSim's.
import { initBlockHasher } from '../../src/tokenize/block-hash.ts';
import { CachedPromptEncoder } from '../../src/tokenize/cached-prompt-encoder.ts';
import type { PromptRefs } from '../../src/tokenize/pool-refs.ts';
import { getTokenizer } from '../../src/tokenize/tokenizer.ts';
import type { ChatMessage } from '../../src/tokenize/types.ts';
import { loadFleet } from './fleet.ts';
import type { LiveRequest } from './live-request.ts';
import { FleetSim, type RunState, type SimOptions } from './sim-run.ts';
import type { SimRequest, Workload } from './workload-types.ts';

/** One chat request as a client sends it with `ignore_eos`: its reply is exactly `maxTokens` long. */
export interface ListedChat {
  /** Arrival, ms after the run starts. */
  atMs: number;
  messages: ChatMessage[];
  maxTokens: number;
}

/** Segment and prefix-hash cache of the encoder: the lists are small. */
const ENCODER_CACHE_BYTES = 8 * 1024 * 1024;

/**
 * The list as the simulator's requests (base model, replies no later prompt carries), in arrival order.
 * `refs`: the pool's tokenizer and chat template (pool-refs.ts promptRefs(pool)); Llama 3.1's by default.
 */
export async function chatRequests(chats: readonly ListedChat[], blockSize: number, refs: PromptRefs = { tokenizer: 'llama3', template: 'llama3.1' }): Promise<SimRequest[]> {
  await initBlockHasher();
  getTokenizer(refs.tokenizer);
  const encoder = new CachedPromptEncoder(ENCODER_CACHE_BYTES);
  const sortedChats = [...chats].sort((a, b) => a.atMs - b.atMs);
  return sortedChats.map((c, seq) => {
    const p = encoder.encode({ tokenizer: refs.tokenizer, template: refs.template, blockSize, kind: 'chat', messages: c.messages, tools: null, adapter: null });
    return {
      seq, atMs: c.atMs, adapter: null, promptTokens: p.tokens.length, outputTokens: c.maxTokens, maxTokens: c.maxTokens,
      blockHashes: p.blockHashes, replyHashes: null,
    };
  });
}

class ListWorkload implements Workload {
  readonly name = 'request-list';
  private i = 0;

  constructor(private readonly requests: readonly SimRequest[]) {}

  next(): SimRequest | null {
    return this.requests[this.i++] ?? null;
  }
}

/** What one listed request got: its replica slot, TTFT (NaN: no first token) and cached prompt tokens. */
export interface ListedOutcome {
  slot: number;
  ttftMs: number;
  cachedTokens: number;
}

export interface ListRunState extends RunState {
  /** Per request, in the list's order. */
  outcomes: ListedOutcome[];
}

/** FleetSim keeping each request's outcome as it settles. */
class ListSim extends FleetSim {
  readonly outcomes: ListedOutcome[];

  constructor(o: SimOptions, n: number) {
    super(o);
    this.outcomes = Array.from({ length: n }, () => ({ slot: -1, ttftMs: Number.NaN, cachedTokens: 0 }));
  }

  override settle(lr: LiveRequest, finished: boolean): void {
    if (!lr.settled) {
      const out = this.outcomes[lr.req.seq]!;
      out.slot = lr.slot;
      out.ttftMs = lr.firstTokenMs - lr.req.atMs;
      out.cachedTokens = lr.cachedTokens;
    }
    super.settle(lr, finished);
  }
}

/** Runs `requests` (arrival order) on one pool of `fleet` (`seed`, `demo` or a config path) with one gateway. */
export function simulateRequestList(fleetSpec: string, poolId: string, policy: string, requests: readonly SimRequest[], seed = 1): ListRunState {
  const fleet = loadFleet(fleetSpec);
  const pool = fleet.pools.find((p) => p.id === poolId);
  if (!pool) throw new RangeError(`no pool ${poolId} in fleet ${fleetSpec}`);
  // A live gateway opens its port only once it has scraped every replica: the list starts two scrapes in.
  // (The first scrape is stamped at virtual time 0, which the registry row reads as "never scraped", so
  // admission sheds anything before the second.)
  const leadMs = 2 * fleet.config.registry.scrape_interval_ms;
  const shifted = requests.map((r, seq) => ({ ...r, seq, atMs: r.atMs + leadMs }));
  const last = shifted.length > 0 ? shifted[shifted.length - 1]!.atMs : 0;
  const sim = new ListSim({
    pool, fleet, policy, workload: new ListWorkload(shifted), durationMs: last + 1, gateways: 1, seed, warmupMs: leadMs,
  }, shifted.length);
  return { ...sim.run(), outcomes: sim.outcomes };
}
