// Admission control for one pool: admit, queue or shed each request, and dispatch queued ones the moment
// room appears. The rules (src/admission/README.md has them with examples):
//   need  = prompt + the reply's KV figure × n (request-figures.ts) − the chosen replica's predicted cached prompt blocks × block size
//   room  = the pool's free KV beyond the headroom (pool-budget.ts) − the needs queued ahead of this request
//   admit when the router's choice fits (decision.fits; fewer than connections_per_replica of this
//         gateway's requests in flight there; and, its row fresh, room for `need` beyond its own headroom:
//         a replica failing either is excluded and the router asked again), the GPU-time model expects it
//         to start there within its tier's TTFT without pushing the batch past the TPOT target
//         (gpu-fit.ts), AND room ≥ need (the policy's least bad choice too, when the model sees everything
//         there and its worst case meets the budget: gpu-fit.ts); otherwise
//   queue, ordered by deadline (deadline.ts), only when the predicted wait plus the TTFT after it still
//         meets the budget;
//   shed  (429 server_overloaded, Retry-After = the predicted time until it would fit) at arrival otherwise,
//         when the queue is full, or when its deadline passes in the queue.
//   A request larger than every replica's whole KV gets 400 context_length_exceeded at once.
// Work conservation: before a request is queued or shed (at arrival, or when its deadline passes), a member
// that is idle by the table and the ledger and whose free KV holds it takes it, fit or not (fitting-route.ts):
// a request is never refused while a replica that could serve it has nothing to do. Targets out of reach even
// idle are judged against what an idle replica reaches (gpu-fit.ts, reach.ts) and counted.
// Retry-After is a prediction, never a stand-in: the model's wait, the KV drain, or when a replica goes idle
// (its streams' ends, GpuPrediction.idleMs); a pool whose state nothing shows gets 503, not a guessed 429.
// The pump re-routes from the head when a request on this pool ends (released), at every scrape interval
// while the queue is non-empty, and when a queued request leaves; an entry that does not fit keeps its
// tokens reserved, so smaller ones behind it may use what is left but never what it waits for.
// Callbacks (`done`) run synchronously inside acquire/pump/cancel, and the caller records its dispatch in the
// ledger before returning: the next decision, in the same pump, sees it (connection count, KV estimate).
// Thread: the acceptor. No I/O; every wait goes through the injected Clock (virtual in the simulator).
import type { RouteResult } from '../router/route.ts';
import { FittingRoute } from './fitting-route.ts';
import { infeasibleReason } from './reach.ts';
import { allowanceOf, needOf } from './request-figures.ts';
import { kvReplyTokens } from '../gpu-time/reply-length/reply-forecast.ts';
import { AdmissionTicket } from './ticket.ts';
import { overloaded, tooLarge } from './rejections.ts';
import { DeadlineQueue } from './deadline-queue.ts';
import { DrainRate } from './drain-rate.ts';
import { GpuFit } from './gpu-fit.ts';
import { PoolBudget } from './pool-budget.ts';
import type { AdmissionDeps, AdmissionDone, AdmissionRequest, ShedReason } from './types.ts';

export { AdmissionTicket } from './ticket.ts';
export type { AdmissionDeps } from './types.ts';

/** Weight of each request leaving the queue in the share that missed their deadline (≈ the last ten). */
const MISS_SHARE_ALPHA = 0.1;
/** What the pump did with one queued entry. */
const STAYS = 0;
const ADMITTED = 1;
const UNROUTABLE = 2;

let ticketSeq = 0;

export class PoolAdmission {
  readonly poolId: string;
  private readonly deps: AdmissionDeps;
  private readonly queue = new DeadlineQueue<AdmissionTicket>();
  private readonly drain = new DrainRate();
  private readonly b = new PoolBudget();
  /** Admitted and not yet released: the pool is busy while > 0 (the drain rate counts busy time only). */
  private inflight = 0;
  private timer: unknown = null;
  private timerAt = 0;
  private pumping = false;
  /**
   * The share of recent queued requests (an EWMA, ≈ the last ten to leave the queue) whose deadline passed
   * before they could be admitted. While it is over one half and the queue is not empty, a new request that
   * would have to queue is shed at once, answered in microseconds instead of after waiting out its deadline:
   * the KV drain estimate cannot see a pool whose compute (prefill, TPOT), not its KV, is what runs out.
   */
  private missShare = 0;
  private pumpAgain = false;
  private readonly snapshot: AdmissionTicket[] = [];
  private readonly fit = new GpuFit();
  private readonly routes: FittingRoute;

  constructor(poolId: string, deps: AdmissionDeps) {
    this.poolId = poolId;
    this.deps = deps;
    this.routes = new FittingRoute(deps);
  }

  get queueDepth(): number {
    return this.queue.length;
  }

  get queuedTokens(): number {
    return this.queue.queuedTokens;
  }

  get inflightCount(): number {
    return this.inflight;
  }

  acquire(req: AdmissionRequest, done: AdmissionDone): AdmissionTicket {
    const deps = this.deps;
    const cfg = deps.cfg;
    const now = deps.clock.now();
    const r = req.route;
    const outputTokens = r.maxTokens * req.n;
    // Routing (kv-aware's fit) and the GPU-time judgement hold the request to its tier's TTFT.
    r.ttftBudgetMs = cfg.ttft_ms_by_tier[req.tier];
    const t = new AdmissionTicket(req, done, now, allowanceOf(deps.gpu, req, cfg), ticketSeq = (ticketSeq + 1) | 0, needOf(req, 0));
    const b = this.readBudget();
    // NaN (no member reports its size) compares false: the check is skipped rather than guessed.
    if (r.promptTokens + outputTokens > b.wholeMaxTokens) {
      this.settle(t, { kind: 'rejected', rejection: tooLarge(req, b.wholeMaxTokens), shed: null, queuedMs: 0 });
      return t;
    }
    const tierMs = cfg.ttft_ms_by_tier[req.tier];
    const fig = deps.gpu.figures(r.poolId);
    const infeasible = fig === undefined ? null : infeasibleReason(fig, r.promptTokens, r.promptTokens + kvReplyTokens(r) * req.n, tierMs);
    if (infeasible !== null) deps.metrics?.infeasible?.(this.poolId, req.tier, infeasible);
    const fit = this.routes.routeFitting(req);
    if (!fit.ok && fit.reason !== 'full') {
      this.settle(t, { kind: 'unroutable', reason: fit.reason, queuedMs: 0 });
      return t;
    }
    const ahead = this.queue.tokensAhead(t.deadlineMs);
    const room = this.room(b) - ahead;
    const gf = this.fit;
    const judged = fit.ok ? fit : fit.best;
    let gpuOk = false;
    if (judged !== undefined) {
      t.needTokens = needOf(req, judged.decision.cachedBlocks);
      gpuOk = gf.judge(deps.gpu, r, judged.slot, judged.decision.cachedBlocks, tierMs, 0, cfg.ttft_margin, cfg.tpot_margin);
      // The policy's least bad choice is taken when its worst case fits the budget (gf.certain): the policy
      // held it to the margin, which is for what the model cannot see there, and there is none of it.
      if ((fit.ok || gf.certain) && gpuOk && room >= t.needTokens) {
        gf.record(judged.decision);
        this.admit(t, judged, 0);
        return t;
      }
    }
    if (this.admitIdle(t, 0)) return t;
    if (this.queue.length >= cfg.max_queued_requests) {
      return this.shed(t, 'queue_full', this.waitMs(this.queue.queuedTokens, t.needTokens, this.room(b), now), 0);
    }
    let waitMs: number;
    if (judged !== undefined && !gpuOk) {
      // The GPUs, not the KV, are what this request waits for: queue only if waiting then starting still meets its TTFT.
      if (!gf.worthQueueing(deps.pollMs)) return this.shed(t, 'slo_unreachable', gf.waitMs, 0);
      // Held back by streams its prefill would push past their TPOT: they end by harmClearMs, then one poll.
      waitMs = gf.p.harm > 0 ? gf.waitMs + deps.pollMs : gf.waitMs;
      if (room < t.needTokens) {
        const kvWait = this.waitMs(ahead, t.needTokens, this.room(b), now);
        if (kvWait > waitMs) waitMs = kvWait;
      }
    } else {
      waitMs = this.waitMs(ahead, t.needTokens, this.room(b), now);
    }
    if (waitMs > t.allowanceMs) return this.shed(t, 'wait_exceeds_deadline', waitMs, 0);
    // The queue's own record overrides a hopeful estimate: most of those queued lately waited in vain. Shed
    // now; by the retry, every request queued ahead of this one has left (by its deadline at the latest).
    if (this.queue.length > 0 && this.missShare > 0.5) {
      const ahead = this.queue.lastDeadlineAhead(t.deadlineMs) - now;
      return this.shed(t, 'queue_missing', ahead > waitMs ? ahead : waitMs, 0);
    }
    t.queued = true;
    this.queue.insert(t);
    deps.metrics?.admission(this.poolId, 'queued');
    this.arm(now);
    return t;
  }

  /** The client left: a queued request leaves at once and `done` gets 'cancelled'; otherwise nothing. */
  cancel(t: AdmissionTicket): void {
    if (!t.queued) return;
    this.dequeue(t);
    this.settle(t, { kind: 'cancelled', queuedMs: this.deps.clock.now() - t.arrivedMs });
    this.pump();
  }

  /** An admitted request ended (any outcome) and gave back `tokens` of reservation. */
  released(tokens: number): void {
    const now = this.deps.clock.now();
    this.drain.observe(now, tokens);
    if (this.inflight > 0 && --this.inflight === 0) this.drain.setBusy(now, false);
    this.pump();
  }

  /** Admits what now fits, from the head; sheds entries whose deadline passed. Re-entrant calls fold in. */
  pump(): void {
    if (this.pumping) {
      this.pumpAgain = true;
      return;
    }
    this.pumping = true;
    try {
      do {
        this.pumpAgain = false;
        this.pumpOnce();
      } while (this.pumpAgain);
    } finally {
      this.pumping = false;
    }
    this.arm(this.deps.clock.now());
  }

  /** KV tokens a new request with the latest deadline could take now: the room less everything queued. */
  roomTokens(): number {
    return this.room(this.readBudget()) - this.queue.queuedTokens;
  }

  /** Tokens per second this pool frees: learned from completions, else the decode-throughput fallback. */
  drainPerSecond(now: number, b: PoolBudget = this.readBudget()): number {
    const learned = this.drain.tokensPerSecond(now);
    return Number.isNaN(learned) ? b.decodeDrainPerSecond : learned;
  }

  private pumpOnce(): void {
    if (this.queue.length === 0) return;
    const now = this.deps.clock.now();
    const b = this.readBudget();
    const entries = this.queue.snapshot(this.snapshot);
    let room = this.room(b);
    // No live member: route every entry, so that each learns it is unroutable instead of waiting it out.
    const noneLive = b.live === 0;
    // Some member idle: each entry the rules leave queued tries it (work conservation), deadline order first.
    let idleLeft = this.routes.anyIdle(this.poolId);
    /** Σ needs of the entries still queued before the current one (for a shed entry's honest Retry-After). */
    let before = 0;
    for (let i = 0; i < entries.length; i++) {
      const e = entries[i]!;
      if (!e.queued) continue; // settled by a callback earlier in this walk
      const queuedMs = now - e.arrivedMs;
      if (e.deadlineMs <= now) {
        const served = idleLeft && this.admitIdle(e, queuedMs);
        if (served) idleLeft = this.routes.anyIdle(this.poolId);
        else this.dequeue(e);
        this.observeLeave(!served);
        if (!served) this.shed(e, 'deadline_passed', this.waitMs(before, e.needTokens, this.room(b), now), queuedMs);
        continue;
      }
      // Deadline order: every later entry is unexpired too, and with no room and no idle member none can go.
      if (room <= 0 && !noneLive && !idleLeft) break;
      const left = this.pumpEntry(e, now, room, noneLive);
      if (left === ADMITTED) room -= e.needTokens;
      if (left !== STAYS) continue;
      if (idleLeft && this.admitIdle(e, queuedMs)) {
        this.observeLeave(false);
        idleLeft = this.routes.anyIdle(this.poolId);
        continue;
      }
      room -= e.needTokens;
      before += e.needTokens;
    }
    entries.length = 0;
  }

  /**
   * One queued entry, as at arrival: admitted when the policy's choice fits (its least bad one when the
   * worst case fits there) and the room covers its need; unroutable when the pool has no replica left for it.
   */
  private pumpEntry(e: AdmissionTicket, now: number, room: number, noneLive: boolean): typeof STAYS | typeof ADMITTED | typeof UNROUTABLE {
    if (room < e.needTokens && !noneLive) return STAYS;
    const routed = this.routes.routeFitting(e.req);
    const cfg = this.deps.cfg;
    if (!routed.ok && routed.reason !== 'full') {
      this.dequeue(e);
      this.settle(e, { kind: 'unroutable', reason: routed.reason, queuedMs: now - e.arrivedMs });
      return UNROUTABLE;
    }
    // As at arrival: the policy's choice when it fits, its least bad one when the worst case fits there.
    const fit = routed.ok ? routed : routed.best;
    if (fit === undefined || !this.fit.judge(this.deps.gpu, e.req.route, fit.slot, fit.decision.cachedBlocks, cfg.ttft_ms_by_tier[e.req.tier], now - e.arrivedMs, cfg.ttft_margin, cfg.tpot_margin) ||
      (!routed.ok && !this.fit.certain)) return STAYS;
    this.queue.setNeed(e, needOf(e.req, fit.decision.cachedBlocks));
    if (room < e.needTokens) return STAYS;
    this.dequeue(e);
    this.observeLeave(false);
    this.fit.record(fit.decision);
    this.admit(e, fit, now - e.arrivedMs);
    return ADMITTED;
  }

  /**
   * Work conservation: an idle member that can serve the request takes it (FittingRoute.routeIdle), with the
   * model's prediction there recorded for learning. Requests queued ahead go first: while any waits, the
   * pump runs before a new arrival may take an idle replica. False when no member is idle for it.
   */
  private admitIdle(t: AdmissionTicket, queuedMs: number): boolean {
    if (!t.queued && this.queue.length > 0 && !this.pumping) {
      if (this.routes.routeIdle(t.req) === null) return false;
      this.pump();
    }
    const idle = this.routes.routeIdle(t.req);
    if (idle === null) return false;
    const cfg = this.deps.cfg;
    this.fit.judge(this.deps.gpu, t.req.route, idle.slot, idle.decision.cachedBlocks, cfg.ttft_ms_by_tier[t.req.tier], queuedMs, cfg.ttft_margin, cfg.tpot_margin);
    this.fit.record(idle.decision);
    if (t.queued) this.dequeue(t);
    this.admit(t, idle, queuedMs);
    return true;
  }

  /** One queued request left the queue: admitted, or `missed` its deadline. */
  private observeLeave(missed: boolean): void {
    this.missShare += MISS_SHARE_ALPHA * ((missed ? 1 : 0) - this.missShare);
  }

  private admit(t: AdmissionTicket, fit: RouteResult & { ok: true }, queuedMs: number): void {
    if (this.inflight++ === 0) this.drain.setBusy(this.deps.clock.now(), true);
    this.deps.metrics?.admission(this.poolId, 'admitted');
    this.settle(t, { kind: 'admitted', slot: fit.slot, replicaId: fit.replicaId, decision: fit.decision, queuedMs });
  }

  /**
   * 429 server_overloaded with Retry-After from `waitMs`, the branch's prediction, or when the first replica
   * that could take it goes idle (an idle replica is never refused) plus one poll for the scrape that shows
   * it, if sooner. Where neither is known (Infinity: the model sees no way the request fits by waiting, or
   * nothing drains that anyone can measure): the KV drain's estimate; with none of these, the pool's state is
   * unknown: 503.
   */
  private shed(t: AdmissionTicket, reason: ShedReason, waitMs: number, queuedMs: number): AdmissionTicket {
    let ms = waitMs;
    // An idle replica is never refused: the request is taken once the first one that could serve it goes idle,
    // after those queued ahead (gone by the last of their deadlines). That bounds ρ's decay, which follows the
    // model's 8 s averaging window, not the work (README: 33 s said on the demo's 70B pool, streams ended in
    // 4). Asked only past Retry-After's 1 s floor: it predicts every member.
    if (ms > 1000) {
      const ahead = this.queue.lastDeadlineAhead(t.deadlineMs) - this.deps.clock.now();
      const idle = this.routes.idleHorizonMs(t.req);
      const whenIdle = Number.isFinite(idle) ? (ahead > idle ? ahead : idle) + this.deps.pollMs : Number.POSITIVE_INFINITY;
      if (whenIdle < ms) ms = whenIdle;
    }
    if (!Number.isFinite(ms)) ms = this.waitMs(this.queue.tokensAhead(t.deadlineMs), t.needTokens, this.roomTokens(), this.deps.clock.now());
    if (!Number.isFinite(ms)) {
      this.settle(t, { kind: 'unroutable', reason: 'no_healthy_replica', queuedMs });
      return t;
    }
    const s = Math.ceil(ms / 1000);
    const retryAfterSeconds = s > 1 ? s : 1;
    this.deps.metrics?.admission(this.poolId, 'shed');
    this.deps.metrics?.shed(this.poolId, reason === 'deadline_passed' ? 'queued' : 'arrival');
    this.settle(t, { kind: 'rejected', rejection: overloaded(reason, retryAfterSeconds, t.allowanceMs, this.poolId, this.deps.cfg.max_queued_requests), shed: reason, queuedMs });
    return t;
  }

  private settle(t: AdmissionTicket, o: Parameters<AdmissionDone>[0]): void {
    if (t.settled) return;
    t.settled = true;
    try {
      t.done(o);
    } catch (err) {
      this.deps.onCallbackError(err);
    }
  }

  private dequeue(t: AdmissionTicket): void {
    this.queue.remove(t);
    t.queued = false;
  }

  /** Room beyond the headroom; unlimited when no live member reports a KV size but some answer fresh. */
  private room(b: PoolBudget): number {
    if (b.counted === 0 && b.sizeUnknown > 0) return Number.POSITIVE_INFINITY;
    return b.roomTokens;
  }

  /**
   * Estimated wait of a request needing `needTokens` behind `aheadTokens` of queued needs, at the pool's
   * drain rate: until the pool has freed what it is short of (ahead + need − room). A request that is not
   * short of KV but found no replica it fits (connections, one replica's room, the policy's fit) waits for
   * the requests ahead of it and then one request's worth to go through: ahead + need. Infinity when the
   * pool frees nothing anyone can measure.
   */
  private waitMs(aheadTokens: number, needTokens: number, room: number, now: number): number {
    const rate = this.drainPerSecond(now, this.b);
    if (!(rate > 0)) return Number.POSITIVE_INFINITY;
    const short = aheadTokens + needTokens - room;
    return ((short > 0 ? short : aheadTokens + needTokens) / rate) * 1000;
  }

  private readBudget(): PoolBudget {
    const deps = this.deps;
    return deps.budget.read(this.poolId, deps.cfg.headroom_ratio, deps.cfg.tpot_target_ms, this.b);
  }

  /** One timer per pool while its queue is non-empty: at the head's deadline or the next poll, whichever is first. */
  private arm(now: number): void {
    const clock = this.deps.clock;
    const head = this.queue.at(0);
    if (head === undefined) {
      if (this.timer !== null) clock.clearTimer(this.timer);
      this.timer = null;
      return;
    }
    const poll = now + this.deps.pollMs;
    const due = head.deadlineMs < poll ? head.deadlineMs : poll;
    if (this.timer !== null) {
      if (this.timerAt <= due) return;
      clock.clearTimer(this.timer);
    }
    this.timerAt = due;
    this.timer = clock.setTimer(due - now, () => {
      this.timer = null;
      this.pump();
    });
  }
}
