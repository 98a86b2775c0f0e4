// An acceptor thread's view of the registry: the same replica table and in-flight ledger (the main thread's
// SharedArrayBuffers, read and updated with Atomics), plus a copy of the membership (which replica holds which
// slot, candidates, adapters) that the main thread's ReplicaRegistry pushes whenever it changes. It answers the
// router's, admission's and pipeline's questions exactly as ReplicaRegistry does.
// Thread: acceptor workers. Hot path: candidates, replica, isHealthy, readRow, residentAdapters,
// reportDataPlane* (array reads and single Atomics, as in ReplicaRegistry). apply() runs per membership change.
import { InflightLedger } from './inflight-ledger.ts';
import type { MembershipSnapshot, ReplicaInfo } from './replica-set.ts';
import { ReplicaTable, type ReplicaRow } from './replica-table.ts';
import { ROW_FLAG, ROW_STATE } from './replica-table-layout.ts';

const EMPTY: readonly number[] = Object.freeze([]);

export class RegistryMirror {
  readonly table: ReplicaTable;
  readonly ledger: InflightLedger;
  private assignIds: readonly number[] = [];
  private infos: ReadonlyArray<ReplicaInfo | null> = [];
  private byId = new Map<string, number>();
  private candidatesByPool = new Map<string, readonly number[]>();
  private running: ReadonlyArray<readonly string[]> = [];
  private waiting: ReadonlyArray<readonly string[]> = [];
  private dataPlaneDownAfter: number;
  private readonly restartListeners: Array<(slot: number) => void> = [];
  private readonly log: (message: string) => void;

  constructor(tableBuffer: SharedArrayBuffer, ledgerBuffer: SharedArrayBuffer, membership: MembershipSnapshot, downAfterFailures: number, log: (message: string) => void) {
    this.table = new ReplicaTable(tableBuffer);
    this.ledger = new InflightLedger(ledgerBuffer);
    this.dataPlaneDownAfter = downAfterFailures;
    this.log = log;
    this.apply(membership);
  }

  /** Takes the main thread's membership as a whole (arrays are replaced, never edited: requests may hold them). */
  apply(m: MembershipSnapshot, downAfterFailures: number = this.dataPlaneDownAfter): void {
    this.assignIds = m.assignIds;
    this.infos = m.infos.map((i) => (i === null ? null : Object.freeze(i)));
    const byId = new Map<string, number>();
    this.infos.forEach((info, slot) => { if (info !== null && !info.draining) byId.set(info.id, slot); });
    this.infos.forEach((info, slot) => { if (info !== null && !byId.has(info.id)) byId.set(info.id, slot); });
    this.byId = byId;
    this.candidatesByPool = new Map(m.candidates.map(([pool, slots]) => [pool, Object.freeze([...slots])]));
    this.running = m.running.map((a) => Object.freeze(a));
    this.waiting = m.waiting.map((a) => Object.freeze(a));
    this.dataPlaneDownAfter = downAfterFailures;
  }

  candidates(poolId: string): readonly number[] {
    return this.candidatesByPool.get(poolId) ?? EMPTY;
  }

  replica(slot: number): ReplicaInfo {
    const info = this.infos[slot];
    if (info === undefined || info === null) throw new RangeError(`replica table slot ${slot} is empty`);
    return info;
  }

  slotOf(replicaId: string): number {
    return this.byId.get(replicaId) ?? -1;
  }

  isHealthy(slot: number): boolean {
    const assignId = this.assignIds[slot] ?? 0;
    return assignId !== 0 && this.table.assignId(slot) === assignId && this.table.state(slot) === ROW_STATE.UP &&
      this.table.dataPlaneFailures(slot) < this.dataPlaneDownAfter;
  }

  readRow(slot: number, out: ReplicaRow): boolean {
    const assignId = this.assignIds[slot] ?? 0;
    return assignId !== 0 && this.table.read(slot, out) && out.assignId === assignId;
  }

  nowMs(): number {
    return Date.now();
  }

  prefixAffinityOff(slot: number): boolean {
    return (this.table.flags(slot) & ROW_FLAG.PREFIX_AFFINITY_OFF) !== 0;
  }

  residentAdapters(slot: number): readonly string[] {
    return this.running[slot] ?? EMPTY_STRINGS;
  }

  waitingAdapters(slot: number): readonly string[] {
    return this.waiting[slot] ?? EMPTY_STRINGS;
  }

  /** The failure count lives in the shared table, so every thread's failures add up to one take-out. */
  reportDataPlaneFailure(slot: number): void {
    const n = this.table.reportDataPlaneFailure(slot);
    if (n === this.dataPlaneDownAfter) this.log(`[registry] replica ${this.infos[slot]?.id ?? slot} out of rotation: ${n} consecutive data-plane connection failures`);
  }

  reportDataPlaneSuccess(slot: number): void {
    this.table.reportDataPlaneSuccess(slot);
  }

  /** Restart events arrive from the main thread (its poller saw the replica's process restart). */
  onRestart(cb: (slot: number) => void): void {
    this.restartListeners.push(cb);
  }

  restarted(slot: number): void {
    for (const cb of this.restartListeners) cb(slot);
  }

  memberSlots(): number[] {
    const out: number[] = [];
    this.infos.forEach((info, slot) => { if (info !== null) out.push(slot); });
    return out;
  }
}

const EMPTY_STRINGS: readonly string[] = Object.freeze([]);
