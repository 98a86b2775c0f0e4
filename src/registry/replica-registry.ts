// The main-thread face of the registry: owns the replica table, the in-flight ledger, the membership and the
// poller thread; answers the router's and pipeline's questions about replicas.
// Thread: main. Hot path: candidates, replica, isHealthy, residentAdapters, reportDataPlane* (array reads and
// single Atomics, no allocation). start, reload and close are setup.
//
// Into rotation: a replica added (at start or by reload) is healthy only after its first good scrape; the
// poller scrapes a new replica at once, so that is one scrape round trip, not one interval. start() waits
// (bounded) for the first scrape of every replica so a gateway does not open its port with an empty fleet.
import type { Worker } from 'node:worker_threads';
import { POLLER_YOUNG_GENERATION_MB, siblingModule, spawnWorker } from '../util/spawn-worker.ts';
import type { GatewayConfig } from '../config/schema.ts';
import { InflightLedger } from './inflight-ledger.ts';
import type { FromPoller, PollerSettings, PollerWorkerData, ToPoller } from './poll/protocol.ts';
import { ReplicaSet, type MembershipSnapshot, type ReplicaInfo } from './replica-set.ts';
import { ReplicaTable, type ReplicaRow } from './replica-table.ts';
import { ROW_FLAG, ROW_STATE } from './replica-table-layout.ts';

export type { MembershipSnapshot, ReplicaInfo } from './replica-set.ts';

const POLLER_URL = siblingModule('../../workers/replica-poller.worker', import.meta.url);
/** A crashed poller is restarted after this long (a crash loop costs at most one thread start a second). */
const POLLER_RESTART_DELAY_MS = 1000;
/** While removed replicas drain, check their in-flight count this often. */
const DRAIN_SWEEP_MS = 100;

export type RestartListener = (slot: number) => void;
export type StateListener = (slot: number, state: number, reason: string) => void;

export interface RegistryOptions {
  /** The gateway metrics' worker channel: the poller thread reports scrape durations and results there. */
  metricsChannel?: string;
  /** Where registry events go; console by default (the observability engineer plugs pino in here). */
  log?: (level: 'info' | 'warn' | 'error', message: string) => void;
}

export class ReplicaRegistry {
  readonly table: ReplicaTable;
  readonly ledger: InflightLedger;
  private readonly set: ReplicaSet;
  private worker: Worker | null = null;
  private settings: PollerSettings;
  private dataPlaneDownAfter: number;
  private readonly restartListeners: RestartListener[] = [];
  private readonly stateListeners: StateListener[] = [];
  private readonly membershipListeners: Array<() => void> = [];
  private readonly firstScrapeWaiters = new Map<number, () => void>();
  private drainTimer: NodeJS.Timeout | null = null;
  private restartTimer: NodeJS.Timeout | null = null;
  private closing = false;
  private readonly log: NonNullable<RegistryOptions['log']>;
  private readonly metricsChannel: string | undefined;

  private constructor(cfg: GatewayConfig, opts: RegistryOptions) {
    const slots = cfg.registry.max_replicas;
    this.table = new ReplicaTable(slots);
    this.ledger = new InflightLedger(slots);
    this.settings = settingsOf(cfg);
    this.dataPlaneDownAfter = cfg.registry.down_after_failures;
    this.log = opts.log ?? defaultLog;
    this.metricsChannel = opts.metricsChannel;
    this.set = new ReplicaSet(slots, this.ledger, (msg) => this.send(msg));
  }

  /** Starts the poller thread, assigns every configured replica and waits (bounded) for their first scrape. */
  static async start(cfg: GatewayConfig, opts: RegistryOptions = {}): Promise<ReplicaRegistry> {
    const reg = new ReplicaRegistry(cfg, opts);
    try {
      await reg.spawnPoller();
    } catch (err) {
      await reg.close();
      throw err;
    }
    const added = reg.set.apply(cfg);
    await reg.waitForFirstScrapes(added, cfg.registry.scrape_timeout_ms + cfg.registry.scrape_interval_ms + 500);
    return reg;
  }

  /** Slots of the pool's members in config order: drained, removed and weight-0 replicas excluded. Health is
   * not applied here (see isHealthy). The array is frozen and replaced on reload: safe to hold per request. */
  candidates(poolId: string): readonly number[] {
    return this.set.candidates(poolId);
  }

  replica(slot: number): ReplicaInfo {
    const info = this.set.info(slot);
    if (info === undefined) throw new RangeError(`replica table slot ${slot} is empty`);
    return info;
  }

  /** -1 when no live member has this id. */
  slotOf(replicaId: string): number {
    return this.set.slotOf(replicaId);
  }

  /** Up per its last scrape, the row is this member's (not a previous occupant's), and fewer than
   * down_after_failures consecutive data-plane connection failures since. */
  isHealthy(slot: number): boolean {
    const assignId = this.set.assignIds[slot]!;
    return assignId !== 0 && this.table.assignId(slot) === assignId && this.table.state(slot) === ROW_STATE.UP &&
      this.table.dataPlaneFailures(slot) < this.dataPlaneDownAfter;
  }

  /** The slot's last scraped row, seqlock-consistent, when it is this member's (not a previous occupant's). */
  readRow(slot: number, out: ReplicaRow): boolean {
    const assignId = this.set.assignIds[slot]!;
    return assignId !== 0 && this.table.read(slot, out) && out.assignId === assignId;
  }

  /** Rows are stamped with Date.now() by the poller. */
  nowMs(): number {
    return Date.now();
  }

  /** The replica's block_size differs from its pool's: do not use prefix-cache affinity for it. */
  prefixAffinityOff(slot: number): boolean {
    return (this.table.flags(slot) & ROW_FLAG.PREFIX_AFFINITY_OFF) !== 0;
  }

  /** Adapters running on the replica per its last scrape (lora_requests_info, newest series). */
  residentAdapters(slot: number): readonly string[] {
    return this.set.runningAdapters[slot]!;
  }

  /** Adapters the replica has requests waiting for (loaded soon, or blocked behind max_loras). */
  waitingAdapters(slot: number): readonly string[] {
    return this.set.waitingAdapters[slot]!;
  }

  /** Connection refused or reset by the replica on the data plane. Enough in a row take it out of rotation
   * at once; the next good scrape gives it another chance (half-open). */
  reportDataPlaneFailure(slot: number): void {
    const n = this.table.reportDataPlaneFailure(slot);
    if (n === this.dataPlaneDownAfter) {
      const reason = `${n} consecutive data-plane connection failures`;
      this.log('warn', `[registry] replica ${this.set.info(slot)?.id ?? slot} out of rotation: ${reason}`);
      for (const cb of this.stateListeners) cb(slot, ROW_STATE.DOWN, reason);
    }
  }

  reportDataPlaneSuccess(slot: number): void {
    this.table.reportDataPlaneSuccess(slot);
  }

  /** Called with the slot when its replica's process restarted: its cached prefixes are gone. The row's
   * generation has changed by then, so a (slot, generation) key detects the same without a callback. */
  onRestart(cb: RestartListener): void {
    this.restartListeners.push(cb);
  }

  /** Scrape-driven health transitions (ROW_STATE) and data-plane take-outs, with a reason. */
  onStateChange(cb: StateListener): void {
    this.stateListeners.push(cb);
  }

  /** Called after membership or adapters change (reload, a drained slot freed, a scrape's adapters). */
  onMembershipChange(cb: () => void): void {
    this.membershipListeners.push(cb);
  }

  /** Membership for acceptor threads' mirrors (allocates; see onMembershipChange). */
  membership(): MembershipSnapshot {
    return this.set.snapshot();
  }

  /** Applies membership and registry settings from a new (already validated) config. */
  reload(cfg: GatewayConfig): void {
    if (cfg.registry.max_replicas !== this.set.slots) {
      this.log('warn', `[registry] registry.max_replicas changed to ${cfg.registry.max_replicas}; the table keeps ${this.set.slots} slots until restart`);
    }
    const next = settingsOf(cfg);
    if (next.scrapeIntervalMs !== this.settings.scrapeIntervalMs || next.scrapeTimeoutMs !== this.settings.scrapeTimeoutMs ||
      next.downAfterFailures !== this.settings.downAfterFailures || next.healthEveryScrapes !== this.settings.healthEveryScrapes) {
      this.settings = next;
      this.send({ type: 'settings', settings: next });
    }
    this.dataPlaneDownAfter = cfg.registry.down_after_failures;
    this.set.apply(cfg);
    this.scheduleDrainSweep();
    this.membershipChanged();
  }

  private membershipChanged(): void {
    for (const cb of this.membershipListeners) cb();
  }

  /** Every slot holding a replica, including drained and removed-but-draining ones (gauges, admin views;
   * allocates). */
  memberSlots(): number[] {
    return this.set.memberSlots();
  }

  /** Removed replicas still finishing requests. */
  drainingCount(): number {
    return this.set.drainingSlots();
  }

  async close(): Promise<void> {
    this.closing = true;
    if (this.drainTimer) clearInterval(this.drainTimer);
    if (this.restartTimer) clearTimeout(this.restartTimer);
    this.drainTimer = null;
    this.restartTimer = null;
    for (const resolve of this.firstScrapeWaiters.values()) resolve();
    this.firstScrapeWaiters.clear();
    const w = this.worker;
    this.worker = null;
    if (w) {
      w.postMessage({ type: 'stop' } satisfies ToPoller);
      await w.terminate();
    }
  }

  private send(msg: ToPoller): void {
    this.worker?.postMessage(msg);
  }

  private spawnPoller(): Promise<void> {
    const data: PollerWorkerData = {
      tableBuffer: this.table.buffer, ledgerBuffer: this.ledger.buffer, settings: this.settings,
      ...(this.metricsChannel !== undefined ? { metricsChannel: this.metricsChannel } : {}),
    };
    const w = spawnWorker(POLLER_URL, { workerData: data, name: 'replica-poller', resourceLimits: { maxYoungGenerationSizeMb: POLLER_YOUNG_GENERATION_MB } });
    this.worker = w;
    return new Promise<void>((resolve, reject) => {
      let ready = false;
      w.on('message', (msg: FromPoller) => {
        if (msg.type === 'ready') {
          ready = true;
          resolve();
          return;
        }
        this.onPollerMessage(msg);
      });
      w.on('error', (err) => {
        this.log('error', `[registry] poller thread failed: ${err.stack ?? String(err)}`);
        if (!ready) reject(err);
      });
      w.on('exit', (code) => {
        if (this.worker !== w || this.closing) return;
        this.worker = null;
        this.log('error', `[registry] poller thread exited (code ${code}); restarting in ${POLLER_RESTART_DELAY_MS} ms`);
        this.restartTimer = setTimeout(() => {
          this.restartTimer = null;
          // The new poller adopts rows whose assignId matches, so health and generations carry over.
          this.spawnPoller().then(() => { for (const a of this.set.assignments()) this.send(a); }, () => { /* logged above */ });
        }, POLLER_RESTART_DELAY_MS);
        this.restartTimer.unref();
      });
    });
  }

  private onPollerMessage(msg: FromPoller): void {
    if (msg.type === 'ready') return;
    // Events about a slot's previous occupant (in flight when it was reassigned) are stale.
    if (this.set.assignIds[msg.slot] !== msg.assignId) return;
    switch (msg.type) {
      case 'first-scrape': {
        const resolve = this.firstScrapeWaiters.get(msg.assignId);
        if (resolve) resolve();
        break;
      }
      case 'state': {
        const id = this.set.info(msg.slot)?.id ?? String(msg.slot);
        this.log(msg.state === ROW_STATE.UP ? 'info' : 'warn', `[registry] replica ${id} ${msg.state === ROW_STATE.UP ? 'up' : 'down'}: ${msg.reason}`);
        for (const cb of this.stateListeners) cb(msg.slot, msg.state, msg.reason);
        break;
      }
      case 'restart': {
        this.log('warn', `[registry] replica ${this.set.info(msg.slot)?.id ?? msg.slot} restarted (${msg.reason}); dropping its cached-prefix knowledge`);
        for (const cb of this.restartListeners) cb(msg.slot);
        break;
      }
      case 'adapters':
        this.set.runningAdapters[msg.slot] = Object.freeze(msg.running);
        this.set.waitingAdapters[msg.slot] = Object.freeze(msg.waiting);
        this.membershipChanged();
        break;
      case 'warn':
        // The poller already printed it (loudly, on its own thread); pass it to the structured log too.
        if (this.log !== defaultLog) this.log('warn', `[registry] ${msg.message}`);
        break;
      default: break;
    }
  }

  private waitForFirstScrapes(assignIds: number[], timeoutMs: number): Promise<void> {
    if (assignIds.length === 0) return Promise.resolve();
    return new Promise<void>((resolve) => {
      let left = assignIds.length;
      const timer = setTimeout(done, timeoutMs);
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      for (const id of assignIds) {
        this.firstScrapeWaiters.set(id, () => {
          this.firstScrapeWaiters.delete(id);
          if (--left === 0) done();
        });
      }
    }).finally(() => { for (const id of assignIds) this.firstScrapeWaiters.delete(id); });
  }

  private scheduleDrainSweep(): void {
    if (this.drainTimer || this.set.drainingSlots() === 0) return;
    this.drainTimer = setInterval(() => {
      const left = this.set.sweep();
      if (this.membershipListeners.length > 0) this.membershipChanged();
      if (left === 0 && this.drainTimer) {
        clearInterval(this.drainTimer);
        this.drainTimer = null;
      }
    }, DRAIN_SWEEP_MS);
    this.drainTimer.unref();
  }
}

function settingsOf(cfg: GatewayConfig): PollerSettings {
  return {
    scrapeIntervalMs: cfg.registry.scrape_interval_ms,
    scrapeTimeoutMs: cfg.registry.scrape_timeout_ms,
    downAfterFailures: cfg.registry.down_after_failures,
    healthEveryScrapes: cfg.registry.health_every_scrapes,
  };
}

function defaultLog(level: 'info' | 'warn' | 'error', message: string): void {
  if (level === 'info') console.info(message);
  else if (level === 'warn') console.warn(message);
  else console.error(message);
}
