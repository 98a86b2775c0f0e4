// Membership: which replica lives in which table slot, its strings (id, url, pool, configured adapters), the
// per-pool candidate lists, and slot allocation and reuse across config reloads.
// Thread: main. Setup and reload only, except the by-slot accessors (plain array reads on the hot path).
//
// Slot lifecycle: free -> assigned (new assignId; the poller writes a fresh row with a new generation) ->
// removed (draining: out of every candidate list, in-flight requests finish) -> free again once the ledger
// shows no request in flight on it (the ledger is reset then, never while a request could still touch it).
// A replica whose url or pool changes is a different replica: the old slot drains, a new slot is assigned.
import type { GatewayConfig, PoolConfig, ReplicaConfig } from '../config/schema.ts';
import { LEDGER_INFLIGHT, type InflightLedger } from './inflight-ledger.ts';
import type { ToPoller } from './poll/protocol.ts';

export interface ReplicaInfo {
  readonly id: string;
  readonly url: string;
  readonly poolId: string;
  /** Adapters the config says this replica serves; null = every adapter of its pool. */
  readonly adapters: readonly string[] | null;
  /** No new requests: drained by config, or removed from it and finishing its in-flight requests. */
  readonly draining: boolean;
}

interface Member {
  slot: number;
  assignId: number;
  info: ReplicaInfo;
  poolBlockSize: number;
  weight: number;
  /** Removed from config; freed once nothing is in flight on it. */
  removed: boolean;
}

interface Wanted {
  pool: PoolConfig;
  replica: ReplicaConfig;
}

const EMPTY: readonly number[] = Object.freeze([]);
const NO_ADAPTERS: readonly string[] = Object.freeze([]);

/** Membership as acceptor threads mirror it (registry-mirror.ts): structured-cloneable, by slot. */
export interface MembershipSnapshot {
  readonly assignIds: readonly number[];
  readonly infos: ReadonlyArray<ReplicaInfo | null>;
  readonly candidates: ReadonlyArray<readonly [pool: string, slots: readonly number[]]>;
  readonly running: ReadonlyArray<readonly string[]>;
  readonly waiting: ReadonlyArray<readonly string[]>;
}

export class ReplicaSet {
  readonly slots: number;
  /** assignId by slot, 0 = no member. Read per routing decision to match rows to members. */
  readonly assignIds: Int32Array;
  /** Adapters running / waiting on the replica per its last scrape, by slot (set from poller messages). */
  readonly runningAdapters: Array<readonly string[]>;
  readonly waitingAdapters: Array<readonly string[]>;
  private readonly members: Array<Member | undefined>;
  private readonly byId = new Map<string, number>();
  /** Free slots, highest first, so pop() hands out the lowest: tables stay dense at the front. */
  private readonly freeSlots: number[] = [];
  private readonly pendingFree = new Set<number>();
  /** Replicas the config wants that found no free slot (every slot held by draining replicas). */
  private pendingAdds: Wanted[] = [];
  private candidatesByPool = new Map<string, readonly number[]>();
  private nextAssignId = 1;
  private readonly ledger: InflightLedger;
  private readonly send: (msg: ToPoller) => void;

  constructor(slots: number, ledger: InflightLedger, send: (msg: ToPoller) => void) {
    this.slots = slots;
    this.ledger = ledger;
    this.send = send;
    this.assignIds = new Int32Array(slots);
    this.members = new Array<Member | undefined>(slots);
    this.runningAdapters = new Array<readonly string[]>(slots).fill(NO_ADAPTERS);
    this.waitingAdapters = new Array<readonly string[]>(slots).fill(NO_ADAPTERS);
    for (let s = slots - 1; s >= 0; s--) this.freeSlots.push(s);
  }

  candidates(poolId: string): readonly number[] {
    return this.candidatesByPool.get(poolId) ?? EMPTY;
  }

  info(slot: number): ReplicaInfo | undefined {
    return this.members[slot]?.info;
  }

  slotOf(replicaId: string): number {
    return this.byId.get(replicaId) ?? -1;
  }

  /** Slots that hold a member (live or draining), with their assignment: for re-sending to a new poller. */
  assignments(): ToPoller[] {
    const out: ToPoller[] = [];
    for (const m of this.members) {
      if (m) out.push({ type: 'assign', slot: m.slot, assignId: m.assignId, replicaId: m.info.id, url: m.info.url, poolBlockSize: m.poolBlockSize });
    }
    return out;
  }

  /** Every slot holding a member, live, drained or removed-and-draining, in slot order. Allocates: for
   * gauges and admin views, not the request path (use candidates there). */
  memberSlots(): number[] {
    const out: number[] = [];
    for (const m of this.members) if (m) out.push(m.slot);
    return out;
  }

  /** The whole membership, for acceptor threads (allocates: on reload, sweeps and adapter changes only). */
  snapshot(): MembershipSnapshot {
    return {
      assignIds: Array.from(this.assignIds),
      infos: Array.from(this.members, (m) => m?.info ?? null),
      candidates: [...this.candidatesByPool],
      running: this.runningAdapters,
      waiting: this.waitingAdapters,
    };
  }

  /** Slots removed from config still finishing requests. */
  drainingSlots(): number {
    return this.pendingFree.size;
  }

  /** Applies a config's membership. Returns the assignIds of replicas newly assigned a slot. */
  apply(cfg: GatewayConfig): number[] {
    const wanted = new Map<string, Wanted>();
    for (const pool of cfg.pools) for (const replica of pool.replicas) wanted.set(replica.id, { pool, replica });

    for (const m of this.members) {
      if (m === undefined) continue;
      const w = wanted.get(m.info.id);
      const same = w !== undefined && w.replica.url === m.info.url && w.pool.id === m.info.poolId &&
        w.pool.block_size === m.poolBlockSize;
      const owner = this.byId.get(m.info.id);
      if (!same || (owner !== undefined && owner !== m.slot)) {
        this.remove(m);
        continue;
      }
      // Still wanted, same replica: take the new drain flag, adapters and weight; revive it if it was draining out.
      if (m.removed) this.pendingFree.delete(m.slot);
      m.removed = false;
      m.weight = w.replica.weight;
      m.info = infoOf(w.pool, w.replica);
      this.byId.set(m.info.id, m.slot);
    }

    const added: number[] = [];
    this.pendingAdds = [];
    for (const w of wanted.values()) {
      if (this.byId.has(w.replica.id)) continue;
      const assignId = this.place(w);
      if (assignId > 0) added.push(assignId);
    }
    this.rebuildCandidates(cfg);
    this.sweep();
    return added;
  }

  /**
   * Frees removed slots whose in-flight count reached 0 and places replicas that were waiting for a slot.
   * Returns the number of slots still draining (the registry sweeps again later while it is not 0).
   */
  sweep(): number {
    let freed = false;
    for (const slot of this.pendingFree) {
      if (this.ledger.get(slot, LEDGER_INFLIGHT) !== 0) continue;
      this.pendingFree.delete(slot);
      this.free(slot);
      freed = true;
    }
    if (freed && this.pendingAdds.length > 0) {
      const waiting = this.pendingAdds;
      this.pendingAdds = [];
      for (const w of waiting) this.place(w);
      this.rebuildCandidatesFromMembers();
    }
    return this.pendingFree.size;
  }

  private place(w: Wanted): number {
    const slot = this.freeSlots.pop();
    if (slot === undefined) {
      this.pendingAdds.push(w);
      console.warn(`[registry] no free slot for replica ${w.replica.id}: every slot is held by a draining replica; it joins when one frees`);
      return 0;
    }
    const assignId = this.nextAssignId++;
    const m: Member = {
      slot, assignId, info: infoOf(w.pool, w.replica), poolBlockSize: w.pool.block_size, weight: w.replica.weight, removed: false,
    };
    this.members[slot] = m;
    this.assignIds[slot] = assignId;
    this.byId.set(m.info.id, slot);
    this.send({ type: 'assign', slot, assignId, replicaId: m.info.id, url: m.info.url, poolBlockSize: m.poolBlockSize });
    return assignId;
  }

  private remove(m: Member): void {
    if (this.byId.get(m.info.id) === m.slot) this.byId.delete(m.info.id);
    if (m.removed) return;
    m.removed = true;
    m.info = { ...m.info, draining: true };
    this.pendingFree.add(m.slot);
  }

  private free(slot: number): void {
    const m = this.members[slot];
    if (m === undefined) return;
    this.ledger.resetSlot(slot);
    this.send({ type: 'unassign', slot, assignId: m.assignId });
    this.members[slot] = undefined;
    this.assignIds[slot] = 0;
    this.runningAdapters[slot] = NO_ADAPTERS;
    this.waitingAdapters[slot] = NO_ADAPTERS;
    this.freeSlots.push(slot);
    this.freeSlots.sort((a, b) => b - a);
  }

  private rebuildCandidates(cfg: GatewayConfig): void {
    const next = new Map<string, readonly number[]>();
    for (const pool of cfg.pools) {
      const slots: number[] = [];
      for (const r of pool.replicas) {
        const slot = this.byId.get(r.id);
        if (slot === undefined) continue;
        const m = this.members[slot]!;
        if (!m.removed && !m.info.draining && m.weight > 0) slots.push(slot);
      }
      next.set(pool.id, Object.freeze(slots));
    }
    this.candidatesByPool = next;
  }

  /** After late placements: same rule, members in slot order (config order is not at hand here). */
  private rebuildCandidatesFromMembers(): void {
    const next = new Map<string, number[]>();
    for (const pool of this.candidatesByPool.keys()) next.set(pool, []);
    for (const m of this.members) {
      if (m === undefined || m.removed || m.info.draining || m.weight <= 0) continue;
      let list = next.get(m.info.poolId);
      if (list === undefined) next.set(m.info.poolId, list = []);
      list.push(m.slot);
    }
    const frozen = new Map<string, readonly number[]>();
    for (const [pool, list] of next) frozen.set(pool, Object.freeze(list));
    this.candidatesByPool = frozen;
  }
}

function infoOf(pool: PoolConfig, r: ReplicaConfig): ReplicaInfo {
  return Object.freeze({
    id: r.id,
    url: r.url,
    poolId: pool.id,
    adapters: r.adapters ? Object.freeze([...r.adapters]) : null,
    draining: r.drain,
  });
}
