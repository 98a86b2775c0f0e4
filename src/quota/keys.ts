// The Redis key schema of the quota store, in one place: no other module concatenates key strings.
// Thread: main. Hot path only through the per-tenant cache below (one Map lookup, no string building).
// Every key of a tenant carries the hash tag `{tenant}`, so both keys a script touches live in one cluster
// slot and the scripts run unchanged on Redis Cluster. Tenant names are restricted by the config schema to
// [A-Za-z0-9._:-], so they can never contain a brace and end the tag early.

/** The two keys of one tenant. */
export interface TenantKeys {
  /** HASH {tokens, ts, dur}: the token bucket and the learned lease duration. */
  readonly bucket: string;
  /** ZSET request id -> lease expiry (ms): the concurrency leases. */
  readonly leases: string;
}

export function assertValidKeyPrefix(prefix: string): void {
  // A brace in the prefix would become the hash tag and put every tenant in one slot.
  if (prefix.includes('{') || prefix.includes('}')) throw new Error(`quota.key_prefix must not contain braces: ${prefix}`);
}

export function tenantKeys(prefix: string, tenant: string): TenantKeys {
  const tag = `${prefix}:{${tenant}}`;
  return Object.freeze({ bucket: `${tag}:tb`, leases: `${tag}:leases` });
}

/** Builds each tenant's keys once; the set of tenants is bounded by config, so the map is too. */
export class TenantKeyCache {
  private readonly byTenant = new Map<string, TenantKeys>();
  readonly prefix: string;

  constructor(prefix: string) {
    assertValidKeyPrefix(prefix);
    this.prefix = prefix;
  }

  get(tenant: string): TenantKeys {
    let keys = this.byTenant.get(tenant);
    if (keys === undefined) {
      keys = tenantKeys(this.prefix, tenant);
      this.byTenant.set(tenant, keys);
    }
    return keys;
  }
}
