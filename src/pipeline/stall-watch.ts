// Stall detection: a replica that holds this gateway's requests and shows no progress is given up on within
// upstream.stall_timeout_ms, instead of after request_timeout_ms (10 min: a non-streamed answer comes whole at
// the end, so silence alone says nothing) or first_token_timeout_ms.
//
// The rule, per replica slot, from what the gateway already has:
//   an attempt on the slot that has sent nothing to its client, dispatched at `since`, is stalled when the
//   poller's latest look at the replica (`observed`: its last scrape, good or failed) came at least W after
//   both `since` and the replica's last observed progress (`progress`: the last good scrape whose engine
//   token counters had moved, src/registry/poll/replica-tracker.ts):  observed − max(progress, since) ≥ W.
// Progress is engine-wide, so a replica busy with other gateways' work is never stalled by it; an idle one
// holding only our hung request (vLLM's API server wedged, or the mock's `hang`: /metrics answers, nothing
// runs) shows none; a replica whose scrapes fail (process frozen) has no progress observed either. Measuring
// against the poller's own look instead of the clock means a dead or late poller never declares a stall.
// W must outlast the longest silence of a healthy engine: a prefill is counted when it completes, so a
// 128k-token prompt at ~12k tokens/s on an A100 is ~11 s without a counter moving (the schema says why 30 s).
//
// On a stall every watched attempt on that slot (nothing sent to its client yet) is aborted, which closes its
// upstream connection (vLLM aborts the sequence) and makes it a `stalled` retry on another replica through the
// normal retry path. Streams already relaying are not watched: a stream whose tokens stop is cut by its body
// timeout and ends with one error event. The slot is then held out of routing, on this thread, until its
// counters move again or its generation changes (restart, new occupant); while held, other eligible replicas
// are preferred, and once W has passed it takes one probe request at a time (when this gateway has nothing in
// flight on it), so a replica that recovers with no other traffic comes back.
// Thread: the acceptor (one per acceptor thread: each judges its own attempts). Hot path: watch/unwatch are
// O(1) list links on the attempt itself, no allocation; the tick walks only attempts older than W.
import { LEDGER_INFLIGHT } from '../registry/inflight-ledger.ts';

/** An attempt as the watch sees it: intrusive list links and what the rule needs. */
export interface Watched {
  stallSlot: number;
  /** Date.now() at dispatch. */
  stallSince: number;
  stallPrev: Watched | null;
  stallNext: Watched | null;
  /** Aborts the attempt as stalled (it settles synchronously and unwatches itself). */
  onStall(): void;
}

/** The reads the rule makes: the replica table and the in-flight ledger (ReplicaRegistry, RegistryMirror). */
export interface StallSignals {
  readonly table: { lastAttemptMs(slot: number): number; lastProgressMs(slot: number): number; generation(slot: number): number };
  readonly ledger: { get(slot: number, field: number): number };
}

/** The rule itself (see above): observed − max(progress, since) ≥ windowMs. */
export function isStalled(observedMs: number, progressMs: number, sinceMs: number, windowMs: number): boolean {
  return observedMs - (progressMs > sinceMs ? progressMs : sinceMs) >= windowMs;
}

export class StallWatch {
  private head: Watched | null = null;
  private tail: Watched | null = null;
  private windowMs: number;
  private timer: NodeJS.Timeout | null = null;
  private readonly signals: StallSignals;
  /** Date.now() when each slot was judged stalled; 0 = not held. */
  private readonly heldAt: Float64Array;
  private readonly heldGeneration: Int32Array;
  /** Slots judged stalled in the current tick: 1 + the attempts aborted there; 0 = not stalled. */
  private readonly stallNow: Int32Array;
  private readonly onStalled: (slot: number, attempts: number) => void;
  private readonly now: () => number;
  /** Attempts aborted as stalled since start (tests, diagnostics). */
  stalledAttempts = 0;

  /** `windowMs` 0 turns detection off. `onStalled` is told each stall (log line); the metric is the retry's. */
  constructor(signals: StallSignals, slots: number, windowMs: number, onStalled: (slot: number, attempts: number) => void = () => {}, now: () => number = Date.now) {
    this.now = now;
    this.signals = signals;
    this.heldAt = new Float64Array(slots);
    this.heldGeneration = new Int32Array(slots);
    this.stallNow = new Int32Array(slots);
    this.onStalled = onStalled;
    this.windowMs = windowMs;
  }

  get window(): number {
    return this.windowMs;
  }

  /** A reload may change the window; attempts in flight are judged by the new one from the next tick. */
  reconfigure(windowMs: number): void {
    this.windowMs = windowMs;
    if (this.timer !== null) {
      clearInterval(this.timer);
      this.timer = null;
    }
    if (windowMs > 0 && this.head !== null) this.arm();
  }

  /** Links an attempt that has sent nothing to its client yet (appended: the list stays in dispatch order). */
  watch(a: Watched): void {
    if (this.windowMs <= 0) return;
    a.stallPrev = this.tail;
    a.stallNext = null;
    if (this.tail === null) this.head = a;
    else this.tail.stallNext = a;
    this.tail = a;
    if (this.timer === null) this.arm();
  }

  /** Unlinks it (its first byte reached the client, or it ended). Safe to call on one not watched. */
  unwatch(a: Watched): void {
    const prev = a.stallPrev;
    const next = a.stallNext;
    if (prev === null && next === null && this.head !== a) return;
    if (prev === null) this.head = next;
    else prev.stallNext = next;
    if (next === null) this.tail = prev;
    else next.stallPrev = prev;
    a.stallPrev = null;
    a.stallNext = null;
  }

  /**
   * Whether routing should pass the slot over: judged stalled, no progress since, same occupant, and either
   * within W of the judgement or this gateway still has a request in flight there (the probe).
   */
  held(slot: number): boolean {
    const at = this.heldAt[slot]!;
    if (at === 0) return false;
    const nowMs = this.now();
    const table = this.signals.table;
    if (table.lastProgressMs(slot) > at || table.generation(slot) !== this.heldGeneration[slot]) {
      this.heldAt[slot] = 0;
      return false;
    }
    return nowMs - at < this.windowMs || this.signals.ledger.get(slot, LEDGER_INFLIGHT) > 0;
  }

  /** One pass of the rule over the attempts older than W; aborts those on stalled slots. Returns how many. */
  tick(nowMs: number): number {
    const w = this.windowMs;
    const table = this.signals.table;
    const stallNow = this.stallNow;
    let stalledSlots = 0;
    for (let a = this.head; a !== null && nowMs - a.stallSince >= w; a = a.stallNext) {
      const slot = a.stallSlot;
      if (stallNow[slot] !== 0) continue;
      if (isStalled(table.lastAttemptMs(slot), table.lastProgressMs(slot), a.stallSince, w)) {
        stallNow[slot] = 1;
        stalledSlots++;
      }
    }
    if (stalledSlots === 0) return 0;
    // Rare: every watched attempt on a stalled slot goes, the young ones too (the replica is judged, not the
    // attempt). Aborting unlinks the attempt, so the next link is read first.
    let aborted = 0;
    for (let a = this.head; a !== null;) {
      const next = a.stallNext;
      if (stallNow[a.stallSlot] !== 0) {
        stallNow[a.stallSlot]++;
        aborted++;
        a.onStall();
      }
      a = next;
    }
    for (let slot = 0; slot < stallNow.length && stalledSlots > 0; slot++) {
      const n = stallNow[slot]!;
      if (n === 0) continue;
      stallNow[slot] = 0;
      stalledSlots--;
      this.heldAt[slot] = nowMs;
      this.heldGeneration[slot] = table.generation(slot);
      this.onStalled(slot, n - 1);
    }
    this.stalledAttempts += aborted;
    return aborted;
  }

  close(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }

  /**
   * One unref'd interval per thread, stopped when nothing is watched: W/10 between passes (50 ms to 1 s), so a
   * stall is acted on within W plus a tenth of it plus one scrape interval.
   */
  private arm(): void {
    const every = Math.min(1000, Math.max(50, Math.floor(this.windowMs / 10)));
    this.timer = setInterval(() => {
      if (this.head === null) {
        clearInterval(this.timer!);
        this.timer = null;
        return;
      }
      this.tick(this.now());
    }, every);
    this.timer.unref();
  }
}
