// The memory quota backend's state in one SharedArrayBuffer, so every acceptor thread (server.threads > 1)
// decides acquires and settles itself against one set of buckets and leases: limits stay exact across threads
// and no quota call crosses a thread. Created once per process on the main thread, which alone assigns tenant
// slots (at setup and on reload); acceptors attach to the same buffer (shared-quota-store.ts does the math).
// Thread: main creates and assigns; any thread locks and reads/writes a tenant's cells.
//
// Layout (one buffer, three views):
//   Int32  meta[tenant * 4 + 0..3]  lock word, lease high-water mark, lease region offset, lease region capacity
//   Float64 bucket[tenant * 4 + 0..2] tokens, ts (ms), mean lease duration (ms, NaN until the first settle);
//                                     ts NaN = the tenant has not acquired yet (its bucket starts full)
//   Float64 leaseExpiry[region + i]  expiry in ms; 0 = free (any expiry <= now is free)
//   Int32  leaseWord[(region + i) * 3 + 0..2] the request id's 64-bit hash (two words) and the slot's generation
// Every cell of a tenant but its lock word is read and written only while holding that tenant's lock.
//
// Sizing: `tenantCapacity` slots and a lease pool of `leaseCapacity` entries, fixed for the process's life
// (a SharedArrayBuffer cannot grow here). A tenant's lease region holds max_inflight entries; a reload that adds
// tenants or raises a max_inflight takes new room from the headroom (2x what the starting config needs, plus a
// margin) and fails the reload, changing nothing, once it is used up. Cost: 20 bytes per lease entry, 64 per
// tenant: the default headroom for 100 tenants at max_inflight 256 is about 1 MB.
import type { TenantLimits } from './types.ts';

/** What an acceptor needs to attach: the buffer and its geometry. */
export interface SharedQuotaDescriptor {
  readonly buffer: SharedArrayBuffer;
  readonly tenantCapacity: number;
  readonly leaseCapacity: number;
}

/** Tenant name -> slot in the table (pushed to acceptors at start and with each reload). */
export type TenantSlots = ReadonlyMap<string, number>;

const META = 4;
export const M_LOCK = 0;
export const M_HIGH = 1;
export const M_OFFSET = 2;
export const M_CAP = 3;
const BUCKET = 4;
export const B_TOKENS = 0;
export const B_TS = 1;
export const B_DURATION = 2;
const LEASE_WORDS = 3;
/** Spins before a contended lock sleeps on its word (a holder is a few hundred ns from releasing it). */
const SPINS = 64;
/** Headroom beyond the starting config: room for reloads that add tenants or raise max_inflight. */
const TENANT_MARGIN = 64;
const LEASE_MARGIN = 4096;
/** Lease indices share a number with the tenant slot in a thread's lease handle (shared-quota-store.ts). */
export const MAX_LEASES_PER_TENANT = 1 << 21;

export class SharedQuotaTable {
  readonly descriptor: SharedQuotaDescriptor;
  readonly meta: Int32Array;
  readonly bucket: Float64Array;
  readonly leaseExpiry: Float64Array;
  readonly leaseWord: Int32Array;
  /** Main thread only: the assignment (a store on the main thread reads it live) and the next free lease entry. */
  private readonly slots = new Map<string, number>();
  private leaseTop = 0;

  private constructor(d: SharedQuotaDescriptor) {
    this.descriptor = d;
    const t = d.tenantCapacity;
    const l = d.leaseCapacity;
    // Float64 views first (8-byte aligned), then the Int32 ones.
    let at = 0;
    this.bucket = new Float64Array(d.buffer, at, t * BUCKET);
    at += t * BUCKET * 8;
    this.leaseExpiry = new Float64Array(d.buffer, at, l);
    at += l * 8;
    this.meta = new Int32Array(d.buffer, at, t * META);
    at += t * META * 4;
    this.leaseWord = new Int32Array(d.buffer, at, l * LEASE_WORDS);
  }

  /** Main thread: a table sized for `tenants` with headroom for reloads, every tenant assigned. */
  static create(tenants: readonly TenantLimits[], room: { tenants?: number; leases?: number } = {}): SharedQuotaTable {
    const leases = tenants.reduce((n, t) => n + t.maxInflight, 0);
    const tenantCapacity = room.tenants ?? tenants.length * 2 + TENANT_MARGIN;
    const leaseCapacity = room.leases ?? leases * 2 + LEASE_MARGIN;
    const bytes = tenantCapacity * (BUCKET * 8 + META * 4) + leaseCapacity * (8 + LEASE_WORDS * 4);
    const table = new SharedQuotaTable({ buffer: new SharedArrayBuffer(bytes), tenantCapacity, leaseCapacity });
    table.bucket.fill(Number.NaN);
    table.assign(tenants);
    return table;
  }

  /** Any thread: the same table over a buffer created by `create`. */
  static attach(d: SharedQuotaDescriptor): SharedQuotaTable {
    return new SharedQuotaTable(d);
  }

  /**
   * Main thread, at setup and before a reload reaches the acceptors: gives each new tenant a slot and a lease
   * region of max_inflight entries, and moves a tenant whose max_inflight grew to a larger region (under its
   * lock, entries keep their index, so threads' lease handles stay valid). A tenant that left keeps its slot
   * and state (as the single-thread store keeps it by name). Throws, changing nothing, when the headroom is
   * used up: the gateway must restart to size a larger table.
   */
  assign(tenants: readonly TenantLimits[]): TenantSlots {
    let newTenants = 0;
    let newLeases = 0;
    for (const t of tenants) {
      if (t.maxInflight > MAX_LEASES_PER_TENANT) throw new Error(`quota: max_inflight ${t.maxInflight} of tenant ${t.name} is above ${MAX_LEASES_PER_TENANT}`);
      const slot = this.slots.get(t.name);
      if (slot === undefined) {
        newTenants++;
        newLeases += t.maxInflight;
      } else if (t.maxInflight > this.meta[slot * META + M_CAP]!) {
        newLeases += t.maxInflight;
      }
    }
    const { tenantCapacity, leaseCapacity } = this.descriptor;
    if (this.slots.size + newTenants > tenantCapacity || this.leaseTop + newLeases > leaseCapacity) {
      throw new Error(`quota: the shared memory table is full (${this.slots.size + newTenants} of ${tenantCapacity} tenants, `
        + `${this.leaseTop + newLeases} of ${leaseCapacity} lease entries); restart the gateway to size it for this config`);
    }
    for (const t of tenants) {
      const slot = this.slots.get(t.name);
      if (slot === undefined) {
        const s = this.slots.size;
        const m = s * META;
        this.meta[m + M_OFFSET] = this.leaseTop;
        this.meta[m + M_CAP] = t.maxInflight;
        this.leaseTop += t.maxInflight;
        // Publish the region before any thread can learn the slot (the slot map travels by postMessage after this).
        Atomics.store(this.meta, m + M_LOCK, 0);
        this.slots.set(t.name, s);
      } else if (t.maxInflight > this.meta[slot * META + M_CAP]!) {
        this.grow(slot, t.maxInflight);
      }
    }
    return this.slotMap();
  }

  /** The assignment itself, updated in place by assign (for a store on the main thread). */
  get liveSlots(): TenantSlots {
    return this.slots;
  }

  /** A copy of the assignment, for a postMessage to the acceptors. */
  slotMap(): Map<string, number> {
    return new Map(this.slots);
  }

  /**
   * Takes tenant `slot`'s lock. Critical sections are a few hundred ns (a bucket refill and a scan of the
   * tenant's leases), so a contended taker spins briefly, then sleeps on the word (futex) until the holder
   * wakes it: a holder descheduled mid-section costs the others a sleep, not a spinning core. Sections never
   * throw between lock and unlock (callers use finally). A thread stopped by Worker.terminate() mid-section
   * would leave the lock held: acceptors are terminated only once they have said `closed`, or at the shutdown
   * deadline when the process is about to exit.
   */
  lock(slot: number): void {
    const m = this.meta;
    const i = slot * META + M_LOCK;
    // 0 free, 1 held, 2 held with sleepers (Drepper's futex mutex).
    let c = Atomics.compareExchange(m, i, 0, 1);
    if (c === 0) return;
    for (let n = 0; n < SPINS; n++) {
      if (Atomics.load(m, i) === 0 && (c = Atomics.compareExchange(m, i, 0, 1)) === 0) return;
    }
    if (c !== 2) c = Atomics.exchange(m, i, 2);
    while (c !== 0) {
      Atomics.wait(m, i, 2);
      c = Atomics.exchange(m, i, 2);
    }
  }

  unlock(slot: number): void {
    const i = slot * META + M_LOCK;
    if (Atomics.sub(this.meta, i, 1) !== 1) {
      Atomics.store(this.meta, i, 0);
      Atomics.notify(this.meta, i, 1);
    }
  }

  /** Moves a tenant's leases to a region of `cap` entries at the pool's top (room checked by assign). */
  private grow(slot: number, cap: number): void {
    const m = slot * META;
    this.lock(slot);
    try {
      const from = this.meta[m + M_OFFSET]!;
      const high = this.meta[m + M_HIGH]!;
      const to = this.leaseTop;
      this.leaseExpiry.copyWithin(to, from, from + high);
      this.leaseWord.copyWithin(to * LEASE_WORDS, from * LEASE_WORDS, (from + high) * LEASE_WORDS);
      this.meta[m + M_OFFSET] = to;
      this.meta[m + M_CAP] = cap;
      this.leaseTop += cap;
    } finally {
      this.unlock(slot);
    }
  }
}

export { META, BUCKET, LEASE_WORDS };
