// The design's traffic, generated: 1,800 prompt and 300 output tokens on average with heavy tails (prompts up
// to 32k, outputs up to 4k), tenants whose requests open with a long shared system prompt, multi-turn chats
// whose next turn carries every earlier turn (so it shares the previous prompt's blocks), LoRA tenants on a
// pool with adapters, and Poisson session arrivals with bursts. Open loop: arrival times never depend on
// how the fleet answers, so every policy sees the same requests.
// Block content model: positions [0, system prompt) are the tenant's (its system prompt; the adapter is keyed
// in, as vLLM keys LoRA blocks), later positions the conversation's; block i hashes (block i−1, owner, i).
// Common random numbers across rates: session k (numbered from time 0, negative before it) draws its tenant,
// turns and lengths from a generator of its own, and arrives where the k-th point of one unit-rate Poisson
// stream lands under the rate's time change (bursts are fixed in time). A higher rate moves every session
// earlier and adds sessions at the end; it never changes what a session asks. So on one seed attainment
// falls smoothly with the rate, and the race's search reads the crossing from neighbouring rates that differ
// by their load, not by a fresh draw of the traffic.
// Thread: the run's. Per request: one Float64Array of its blocks, O(blocks) hashing; per session one small
// generator (four words); pending follow-up turns wait in a small binary heap.
import { chain53, pick, Prng, zipfCumulative } from './prng.ts';
import type { PoolShape, SimRequest, Workload } from './workload-types.ts';

/** Parameters, fitted so the stream's means land on the design's 1,800 / 300 (test/unit/sim/seed-mix.test.ts). */
export const SEED_MIX = {
  tenants: 32,
  tenantZipf: 1.0,
  /** LoRA pool: this many tenants with adaptersPerTenant adapters each (about 60 in all). */
  loraTenants: 15,
  adaptersPerTenant: 4,
  systemMedian: 720,
  systemSigma: 0.7,
  systemMax: 6000,
  userMedian: 100,
  userSigma: 1.0,
  /** A pasted document: Pareto-tailed, clipped to the longest prompt. */
  docProbability: 0.02,
  docMin: 2500,
  docAlpha: 1.3,
  outputMedian: 190,
  outputSigma: 0.95,
  outputMax: 4096,
  longestPrompt: 32_768,
  chatProbability: 0.3,
  chatTurnsMean: 3,
  chatTurnsMax: 12,
  thinkMeanMs: 20_000,
  thinkMinMs: 2_000,
  /** Bursts: rate × burstFactor for burstMs, starting as a Poisson process with mean gap burstGapMs. */
  burstFactor: 3,
  burstMs: 3_000,
  burstGapMs: 40_000,
  maxTokensChoices: [1024, 2048, 4096] as const,
} as const;

/** Longer than any chat lasts (12 turns of ~22 s think time would be 264 s, but 99 % of chats end within 150 s). */
const PREHISTORY_MS = 150_000;
/** Generator streams: 2 bursts, 3 tenants, 4 gaps from time 0 on, 5 gaps before it; session k's is SESSION_STREAM + k. */
const SESSION_STREAM = 0x4000_0000;

interface Tenant {
  index: number;
  key: number;
  systemTokens: number;
  /** Hashes of the system prompt's full blocks: the same chain opens every request of the tenant, so it is hashed once. */
  systemHashes: Float64Array;
  maxTokens: number;
  adapter: string | null;
}

interface Turn {
  atMs: number;
  /** The session's own generator: every draw of its turns, whatever the rate. */
  rng: Prng;
  tenant: Tenant;
  convoKey: number;
  /** Tokens of the conversation before this turn's user message (system prompt included). */
  historyTokens: number;
  turnsLeft: number;
  /** Hashes of the conversation's full blocks so far (previous prompt and reply); null = not computed. */
  chain: Float64Array | null;
}

const EMPTY = new Float64Array(0);

export interface SeedMixOptions {
  pool: PoolShape;
  /** Mean requests per second (follow-up turns included). */
  rps: number;
  durationMs: number;
  seed: number;
}

/** Requests per session on average (single requests and chats), used to turn a request rate into a session rate. */
function requestsPerSession(): number {
  const p = SEED_MIX.chatProbability;
  // E[min(geometric, cap)] for the chat length.
  const q = 1 - 1 / SEED_MIX.chatTurnsMean;
  let mean = 0;
  for (let k = 1; k <= SEED_MIX.chatTurnsMax; k++) mean += k * (k === SEED_MIX.chatTurnsMax ? Math.pow(q, k - 1) : Math.pow(q, k - 1) * (1 - q));
  return (1 - p) + p * mean;
}

export class SeedMixWorkload implements Workload {
  readonly name = 'seed-mix';
  private readonly seed: number;
  /** Unit-mean gaps of the sessions from time 0 on. */
  private readonly gaps: Prng;
  private readonly pool: PoolShape;
  private readonly tenants: Tenant[] = [];
  private readonly tenantCum: Float64Array;
  private readonly endMs: number;
  /** Sessions per ms outside bursts (burstFactor times that inside). */
  private readonly sessionRate: number;
  /** Bursts as [start, end) pairs in ms, ascending, from before the prehistory to past the end. */
  private readonly bursts: number[] = [];
  /** Sessions before time 0, ascending: arrival ms and session number (−1 is the last before 0). */
  private readonly early: Array<{ atMs: number; k: number }> = [];
  private earlyNext = 0;
  private nextSessionMs: number;
  /** The number of the next session from time 0 on, and where the forward stream stands (from 0). */
  private nextK = 0;
  private forwardAtMs = 0;
  private readonly pending: Turn[] = [];
  private seq = 0;

  constructor(opts: SeedMixOptions) {
    this.pool = opts.pool;
    this.seed = opts.seed;
    this.gaps = new Prng(opts.seed, 4);
    this.endMs = opts.durationMs;
    const m = SEED_MIX;
    const burstShare = m.burstMs / (m.burstMs + m.burstGapMs);
    const meanFactor = 1 + (m.burstFactor - 1) * burstShare;
    this.sessionRate = opts.rps / requestsPerSession() / meanFactor / 1000;
    const setup = new Prng(opts.seed, 3);
    const lora = opts.pool.adapters.length > 0;
    const count = lora ? m.loraTenants * m.adaptersPerTenant : m.tenants;
    for (let t = 0; t < count; t++) {
      const adapter = lora ? opts.pool.adapters[t % opts.pool.adapters.length]! : null;
      const sys = Math.round(Math.min(m.systemMax, Math.max(64, setup.lognormal(m.systemMedian, m.systemSigma))));
      this.tenants.push({
        index: t,
        key: (setup.u32() | 1) >>> 0,
        systemTokens: sys,
        systemHashes: EMPTY,
        maxTokens: m.maxTokensChoices[setup.int(m.maxTokensChoices.length)]!,
        adapter,
      });
    }
    this.tenantCum = zipfCumulative(count, m.tenantZipf);
    // The busiest tenants carry most of the traffic, so their draws alone would move the stream's mean
    // prompt by hundreds of tokens from seed to seed: scale the system prompts so that their
    // traffic-weighted mean is the distribution's mean (median·e^{σ²/2}) whatever the seed.
    let weighted = 0;
    for (let t = 0; t < count; t++) weighted += this.tenants[t]!.systemTokens * (this.tenantCum[t]! - (t > 0 ? this.tenantCum[t - 1]! : 0));
    const scale = (m.systemMedian * Math.exp((m.systemSigma * m.systemSigma) / 2)) / weighted;
    const bs = opts.pool.blockSize;
    for (const t of this.tenants) {
      t.systemTokens = Math.round(Math.min(m.systemMax, Math.max(64, t.systemTokens * scale)));
      t.systemHashes = new Float64Array(Math.floor(t.systemTokens / bs));
      let parent = 0;
      for (let i = 0; i < t.systemHashes.length; i++) t.systemHashes[i] = parent = chain53(parent, t.key, i);
    }
    // Bursts: a Poisson process of starts in time, the same at every rate.
    const bursts = new Prng(opts.seed, 2);
    for (let start = -PREHISTORY_MS + bursts.exp(m.burstGapMs); ; start += m.burstMs + bursts.exp(m.burstGapMs)) {
      this.bursts.push(start, start + m.burstMs);
      if (start >= this.endMs) break;
    }
    // Sessions start PREHISTORY_MS before time 0 and their requests before 0 are dropped, so the stream
    // opens in steady state (chats already under way) rather than with first turns only. They are placed
    // backwards from 0 (their own gaps), so that session k ≥ 0 is the same session at every rate.
    if (this.sessionRate > 0) {
      const back = new Prng(opts.seed, 5);
      for (let k = -1, t = this.travel(0, back.exp(1) / this.sessionRate, -1); t >= -PREHISTORY_MS; k--, t = this.travel(t, back.exp(1) / this.sessionRate, -1)) {
        this.early.push({ atMs: t, k });
      }
      this.early.reverse();
    }
    this.nextSessionMs = this.drawSessionArrival();
  }

  /**
   * The burst shape (1, or burstFactor inside a burst) of the stretch holding `t`, and that stretch's ends.
   * A boundary belongs to the stretch after it; with `before` set, to the one before it (walking backwards).
   */
  private stretch(t: number, before: boolean): { f: number; from: number; to: number } {
    const b = this.bursts;
    let from = -Infinity;
    for (let i = 0; i < b.length; i += 2) {
      if (before ? t <= b[i]! : t < b[i]!) return { f: 1, from, to: b[i]! };
      if (before ? t <= b[i + 1]! : t < b[i + 1]!) return { f: SEED_MIX.burstFactor, from: b[i]!, to: b[i + 1]! };
      from = b[i + 1]!;
    }
    return { f: 1, from, to: Infinity };
  }

  /**
   * The time change: from `t`, the time at which `mass` ms of base-rate sessions have arrived, going forward
   * (dir 1) or backward (dir −1); inside a burst mass accrues burstFactor times as fast.
   */
  private travel(t: number, mass: number, dir: 1 | -1): number {
    let m = mass;
    for (;;) {
      const s = this.stretch(t, dir < 0);
      const room = (dir > 0 ? s.to - t : t - s.from) * s.f;
      if (m < room) return t + (dir * m) / s.f; // always, in the unbounded first and last stretches
      m -= room;
      t = dir > 0 ? s.to : s.from;
    }
  }

  /** The next session's arrival: before 0 from the list placed backwards, then along the forward stream. */
  private drawSessionArrival(): number {
    if (this.earlyNext < this.early.length) return this.early[this.earlyNext]!.atMs;
    if (this.sessionRate <= 0) return Infinity;
    this.forwardAtMs = this.travel(this.forwardAtMs, this.gaps.exp(1) / this.sessionRate, 1);
    return this.forwardAtMs >= this.endMs ? Infinity : this.forwardAtMs;
  }

  /** The session arriving at nextSessionMs: its number, then the next one's arrival. */
  private takeSession(): number {
    let k: number;
    if (this.earlyNext < this.early.length) k = this.early[this.earlyNext++]!.k;
    else k = this.nextK++;
    this.nextSessionMs = this.drawSessionArrival();
    return k;
  }

  next(): SimRequest | null {
    for (;;) {
      const top = this.pending[0];
      let turn: Turn;
      if (top && top.atMs <= this.nextSessionMs) {
        turn = this.popPending();
      } else if (this.nextSessionMs < this.endMs) {
        const atMs = this.nextSessionMs;
        const k = this.takeSession();
        const rng = new Prng(this.seed, SESSION_STREAM + k);
        const tenant = this.tenants[pick(this.tenantCum, rng)]!;
        const chat = rng.next() < SEED_MIX.chatProbability;
        const turns = chat ? Math.min(SEED_MIX.chatTurnsMax, rng.geometric(SEED_MIX.chatTurnsMean)) : 1;
        turn = { atMs, rng, tenant, convoKey: (rng.u32() ^ k) >>> 0, historyTokens: tenant.systemTokens, turnsLeft: turns, chain: null };
      } else {
        return null;
      }
      const req = this.emit(turn);
      if (req && req.atMs >= 0) {
        req.seq = this.seq++;
        return req;
      }
    }
  }

  /** Builds the request of this turn and queues the next turn; null when the conversation no longer fits. */
  private emit(turn: Turn): SimRequest | null {
    const m = SEED_MIX;
    const { rng, tenant } = turn;
    const maxTokens = Math.min(tenant.maxTokens, this.pool.maxModelLen - 1);
    const longest = Math.min(m.longestPrompt, this.pool.maxModelLen - maxTokens);
    let user = Math.max(1, Math.round(rng.lognormal(m.userMedian, m.userSigma)));
    if (rng.next() < m.docProbability) user += Math.round(rng.pareto(m.docMin, m.docAlpha));
    let output = Math.round(rng.lognormal(m.outputMedian, m.outputSigma));
    output = Math.max(1, Math.min(output, m.outputMax, maxTokens));
    let prompt = turn.historyTokens + user;
    if (prompt > longest) {
      // A later turn that no longer fits ends the conversation; a first turn keeps its (clipped) document.
      if (turn.historyTokens > tenant.systemTokens || tenant.systemTokens + 1 > longest) return null;
      prompt = longest;
    }
    const think = turn.turnsLeft > 1 ? m.thinkMinMs + rng.exp(m.thinkMeanMs) : 0;
    // Requests before time 0 only move the conversations along: their hashes are never needed.
    const live = turn.atMs >= 0;
    const bs = this.pool.blockSize;
    const blocks = Math.floor(prompt / bs);
    const end = Math.floor((prompt + output) / bs);
    const hashes = live ? new Float64Array(blocks) : EMPTY;
    // Every turn's reply is hashed, whether or not a next turn follows: the gateway hashes each finished reply.
    const replyHashes = live ? new Float64Array(Math.max(0, end - blocks)) : null;
    if (live) {
      // Blocks this conversation already hashed (its previous prompt and reply) are copied, not recomputed.
      // A first turn starts from the tenant's system prompt, hashed once per tenant.
      const prefix = turn.chain ?? tenant.systemHashes;
      const known = Math.min(prefix.length, blocks);
      if (known > 0) hashes.set(prefix.subarray(0, known));
      let parent = known > 0 ? hashes[known - 1]! : 0;
      for (let i = known; i < end; i++) {
        const owner = (i + 1) * bs <= tenant.systemTokens ? tenant.key : turn.convoKey;
        parent = chain53(parent, owner, i);
        if (i < blocks) hashes[i] = parent;
        else replyHashes![i - blocks] = parent;
      }
    }
    if (turn.turnsLeft > 1) {
      const nextAt = turn.atMs + think;
      if (nextAt < this.endMs) {
        let chain: Float64Array | null = null;
        if (live && replyHashes) {
          chain = new Float64Array(blocks + replyHashes.length);
          chain.set(hashes);
          chain.set(replyHashes, blocks);
        }
        this.pushPending({ atMs: nextAt, rng, tenant, convoKey: turn.convoKey, historyTokens: prompt + output, turnsLeft: turn.turnsLeft - 1, chain });
      }
    }
    return {
      seq: 0, atMs: turn.atMs, adapter: tenant.adapter, promptTokens: prompt, outputTokens: output,
      maxTokens, blockHashes: hashes, replyHashes,
      origin: { tenant: tenant.index, conversation: turn.convoKey, systemTokens: tenant.systemTokens, historyTokens: turn.historyTokens },
    };
  }

  private pushPending(t: Turn): void {
    const h = this.pending;
    h.push(t);
    let i = h.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (h[p]!.atMs <= t.atMs) break;
      h[i] = h[p]!;
      i = p;
    }
    h[i] = t;
  }

  private popPending(): Turn {
    const h = this.pending;
    const top = h[0]!;
    const last = h.pop()!;
    if (h.length > 0) {
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        if (l >= h.length) break;
        const r = l + 1;
        const c = r < h.length && h[r]!.atMs < h[l]!.atMs ? r : l;
        if (h[c]!.atMs >= last.atMs) break;
        h[i] = h[c]!;
        i = c;
      }
      h[i] = last;
    }
    return top;
  }
}
