// QuotaStore over a SharedQuotaTable: the memory backend's semantics (memory-quota-store.ts, itself the Lua
// scripts line for line) with the state in a SharedArrayBuffer, so each acceptor thread decides its own
// acquires and settles under a per-tenant lock and the limits hold exactly across threads.
// Thread: any (one instance per thread, all over one table). Hot path: acquire = hash the id, lock, refill,
// one scan of the tenant's occupied lease entries (up to its high-water mark: the most leases it has held at
// once, at most max_inflight; ~1 ns per entry), unlock; settle = one Map lookup, lock, refund, unlock. One
// small handle object per admitted request, kept in this thread's Map until its settle: per-request state
// never crosses threads, and a settle is O(1) on the thread that acquired.
// Renewal: each thread renews the leases it holds, every lease_ttl/3 (at most every 250 ms). A thread that
// dies stops renewing, so its leases expire one TTL later (like a crashed gateway's in Redis) instead of
// being renewed forever by a sweep that cannot tell a live holder from a dead one.
// Clock: timeOrigin + performance.now() per thread (monotonic); threads' origins agree to well under a ms,
// and a clock that reads behind the bucket's ts pauses the refill (never a negative one), like Redis TIME.
import { performance } from 'node:perf_hooks';
import {
  assertCost, DEFAULT_LEASE_DURATION_MS, LEASE_DURATION_EWMA_WEIGHT, REASON_CONCURRENCY, REASON_OK, REASON_TOKENS, toDecision,
} from './decision.ts';
import type { QuotaDecision, QuotaStore, QuotaStoreStats, TenantLimits } from './types.ts';
import {
  B_DURATION, B_TOKENS, B_TS, BUCKET, LEASE_WORDS, M_CAP, M_HIGH, M_OFFSET, META, type SharedQuotaTable, type TenantSlots,
} from './shared-quota-table.ts';

export interface SharedQuotaStoreOptions {
  leaseTtlMs: number;
  /** Milliseconds since the epoch; injected by tests. */
  clock?: () => number;
  /** Renew this thread's live leases every leaseTtlMs / 3 (at most every 250 ms) (default true). */
  renewLeases?: boolean;
}

/** An admitted request's lease, as this thread remembers it. */
interface Lease {
  readonly slot: number;
  readonly index: number;
  readonly gen: number;
}

const STATS: QuotaStoreStats = Object.freeze({
  backend: 'memory', redisUp: true, redisFailures: 0, degradedAdmissions: 0, unavailableRefusals: 0,
  pendingSettles: 0, replayedSettles: 0, droppedSettles: 0,
});

const monotonicNow = (): number => performance.timeOrigin + performance.now();

export class SharedQuotaStore implements QuotaStore {
  private readonly t: SharedQuotaTable;
  private slots: TenantSlots;
  private readonly leaseTtlMs: number;
  private readonly clock: () => number;
  private readonly renewTimer: NodeJS.Timeout | null;
  /** This thread's admitted requests by quota id. */
  private readonly held = new Map<string, Lease>();
  /** Live expiries of a tenant at its cap, sorted for the concurrency Retry-After (refusals only). */
  private scratch = new Float64Array(64);
  private hashHi = 0;
  private hashLo = 0;

  constructor(table: SharedQuotaTable, slots: TenantSlots, opts: SharedQuotaStoreOptions) {
    this.t = table;
    this.slots = slots;
    this.leaseTtlMs = opts.leaseTtlMs;
    this.clock = opts.clock ?? monotonicNow;
    if (opts.renewLeases === false) {
      this.renewTimer = null;
    } else {
      this.renewTimer = setInterval(() => this.renewLive(), Math.max(250, Math.floor(this.leaseTtlMs / 3)));
      this.renewTimer.unref();
    }
  }

  /** The tenant assignment after a reload (the main thread assigned it before sending it here). */
  setSlots(slots: TenantSlots): void {
    this.slots = slots;
  }

  /** Leases this thread holds (admitted, not yet settled; expired ones leave at the next renewal). */
  get heldCount(): number {
    return this.held.size;
  }

  acquire(tenant: TenantLimits, requestId: string, costTokens: number): Promise<QuotaDecision> {
    return Promise.resolve(this.acquireNow(tenant, requestId, costTokens));
  }

  /** The synchronous core of acquire (mirrors MemoryQuotaStore.acquireNow and token-bucket.lua). */
  acquireNow(tenant: TenantLimits, requestId: string, costTokens: number): QuotaDecision {
    assertCost(costTokens);
    const slot = this.slotOf(tenant);
    this.hash(requestId);
    const hi = this.hashHi;
    const lo = this.hashLo;
    const t = this.t;
    t.lock(slot);
    try {
      const now = this.clock();
      const rate = tenant.tokensPerSecond;
      const burst = tenant.burstTokens;
      const b = slot * BUCKET;
      if (Number.isNaN(t.bucket[b + B_TS]!)) {
        t.bucket[b + B_TOKENS] = burst;
        t.bucket[b + B_TS] = now;
      }
      // Refill into locals: a refusal writes nothing back to the bucket.
      let tokens = t.bucket[b + B_TOKENS]!;
      let tsMs = t.bucket[b + B_TS]!;
      if (now > tsMs) {
        tokens = tokens + (now - tsMs) * rate / 1000;
        tsMs = now;
      }
      if (tokens > burst) tokens = burst;

      // One pass over the occupied part of the region: live leases, the duplicate id, the first free entry.
      const m = slot * META;
      const off = t.meta[m + M_OFFSET]!;
      const cap = t.meta[m + M_CAP]!;
      const high = t.meta[m + M_HIGH]!;
      const exp = t.leaseExpiry;
      const words = t.leaseWord;
      let inflight = 0;
      let free = -1;
      let lastLive = -1;
      let dupExpiry = 0;
      for (let i = 0; i < high; i++) {
        const e = exp[off + i]!;
        if (e > now) {
          inflight++;
          lastLive = i;
          const w = (off + i) * LEASE_WORDS;
          if (words[w] === hi && words[w + 1] === lo) dupExpiry = e;
        } else if (free < 0) {
          free = i;
        }
      }
      if (free < 0 && high < cap) free = high;
      // Entries above the last live one are free: the next scan stops there.
      t.meta[m + M_HIGH] = lastLive + 1;

      let resetMs = Math.ceil((burst - tokens) * 1000 / rate);
      let tokenWaitMs = 0;
      if (costTokens > burst) tokenWaitMs = Math.max(resetMs, 1);
      else if (tokens < costTokens) tokenWaitMs = Math.ceil((costTokens - tokens) * 1000 / rate);

      // free < 0 only if a reload lowered max_inflight below the leases held: the cap check refuses first.
      const atCap = dupExpiry !== 0 || inflight >= tenant.maxInflight || free < 0;
      let leaseWaitMs = 0;
      if (atCap) {
        const expiry = dupExpiry !== 0 ? dupExpiry : this.kthLiveExpiry(off, high, now, Math.max(0, inflight - tenant.maxInflight));
        const d = t.bucket[b + B_DURATION]!;
        const mean = Number.isNaN(d) ? DEFAULT_LEASE_DURATION_MS : d;
        leaseWaitMs = Math.ceil(Math.min(expiry - now, Math.max(0, expiry - this.leaseTtlMs + mean - now)));
      }

      const remaining = Math.floor(tokens);
      if (tokenWaitMs > 0) {
        return toDecision(tenant, false, REASON_TOKENS, remaining, resetMs, inflight, Math.max(tokenWaitMs, leaseWaitMs), false);
      }
      if (atCap) return toDecision(tenant, false, REASON_CONCURRENCY, remaining, resetMs, inflight, leaseWaitMs, false);

      const left = tokens - costTokens;
      t.bucket[b + B_TOKENS] = left;
      t.bucket[b + B_TS] = tsMs;
      const at = off + free;
      exp[at] = now + this.leaseTtlMs;
      const w = at * LEASE_WORDS;
      words[w] = hi;
      words[w + 1] = lo;
      const gen = (words[w + 2]! + 1) | 0;
      words[w + 2] = gen;
      if (free >= lastLive + 1) t.meta[m + M_HIGH] = free + 1;
      this.held.set(requestId, { slot, index: free, gen });
      resetMs = Math.ceil((burst - left) * 1000 / rate);
      return toDecision(tenant, true, REASON_OK, Math.floor(left), resetMs, inflight + 1, 0, false);
    } finally {
      t.unlock(slot);
    }
  }

  settle(tenant: TenantLimits, requestId: string, reservedTokens: number, usedTokens: number): Promise<void> {
    this.settleNow(tenant, requestId, reservedTokens, usedTokens);
    return Promise.resolve();
  }

  /** The synchronous core of settle (mirrors settle.lua). True when this call settled the request. */
  settleNow(tenant: TenantLimits, requestId: string, reservedTokens: number, usedTokens: number): boolean {
    const lease = this.held.get(requestId);
    if (lease === undefined) return false;
    this.held.delete(requestId);
    const { slot } = lease;
    const t = this.t;
    t.lock(slot);
    try {
      const at = t.meta[slot * META + M_OFFSET]! + lease.index;
      // Another request took the entry after this lease expired: nothing of ours is left to release.
      if (t.leaseWord[at * LEASE_WORDS + 2] !== lease.gen) return false;
      const expiry = t.leaseExpiry[at]!;
      if (expiry === 0) return false;
      t.leaseExpiry[at] = 0;
      const now = this.clock();
      if (expiry <= now) return false;
      const b = slot * BUCKET;
      let tokens = t.bucket[b + B_TOKENS]!;
      const tsMs = t.bucket[b + B_TS]!;
      if (now > tsMs) {
        tokens = tokens + (now - tsMs) * tenant.tokensPerSecond / 1000;
        t.bucket[b + B_TS] = now;
      }
      t.bucket[b + B_TOKENS] = Math.min(tenant.burstTokens, tokens + Math.max(0, reservedTokens - usedTokens));
      const d = Math.max(0, now - (expiry - this.leaseTtlMs));
      const mean = t.bucket[b + B_DURATION]!;
      t.bucket[b + B_DURATION] = Number.isNaN(mean) ? d : mean + (d - mean) * LEASE_DURATION_EWMA_WEIGHT;
      return true;
    } finally {
      t.unlock(slot);
    }
  }

  /** Extends this thread's live leases to now + TTL and forgets its expired ones; returns how many it renewed. */
  renewLive(): number {
    const t = this.t;
    let renewed = 0;
    for (const [id, lease] of this.held) {
      t.lock(lease.slot);
      let live = false;
      try {
        const at = t.meta[lease.slot * META + M_OFFSET]! + lease.index;
        const now = this.clock();
        if (t.leaseWord[at * LEASE_WORDS + 2] === lease.gen && t.leaseExpiry[at]! > now) {
          t.leaseExpiry[at] = now + this.leaseTtlMs;
          live = true;
        }
      } finally {
        t.unlock(lease.slot);
      }
      if (live) renewed++;
      else this.held.delete(id);
    }
    return renewed;
  }

  stats(): QuotaStoreStats {
    return STATS;
  }

  /** Stops this thread's renewals; the table is the process's and outlives any one thread's store. */
  close(): Promise<void> {
    if (this.renewTimer !== null) clearInterval(this.renewTimer);
    this.held.clear();
    return Promise.resolve();
  }

  private slotOf(tenant: TenantLimits): number {
    const slot = this.slots.get(tenant.name);
    if (slot === undefined) throw new Error(`quota: tenant ${tenant.name} has no slot in the shared table`);
    return slot;
  }

  /** The k-th smallest live expiry (k from 0) of a tenant's region; under its lock, refusals only. */
  private kthLiveExpiry(off: number, high: number, now: number, k: number): number {
    if (this.scratch.length < high) this.scratch = new Float64Array(high * 2);
    const s = this.scratch;
    let n = 0;
    for (let i = 0; i < high; i++) {
      const e = this.t.leaseExpiry[off + i]!;
      if (e > now) s[n++] = e;
    }
    if (k === 0) {
      let min = s[0]!;
      for (let i = 1; i < n; i++) if (s[i]! < min) min = s[i]!;
      return min;
    }
    return s.subarray(0, n).sort()[k]!;
  }

  /** Two 32-bit FNV-1a hashes of the id (different offsets, one pass) into hashHi / hashLo: 64 bits, no allocation. */
  private hash(id: string): void {
    let a = 0x811c9dc5;
    let b = 0x01000193 ^ 0x5bd1e995;
    for (let i = 0; i < id.length; i++) {
      const c = id.charCodeAt(i);
      a = Math.imul(a ^ c, 0x01000193);
      b = Math.imul(b ^ c, 0x5bd1e995);
      b ^= b >>> 15;
    }
    this.hashHi = a | 0;
    this.hashLo = b | 0;
  }
}
