// Scrape-time gauge sources computed from the replica table: up/down and staleness per replica, KV occupancy
// per pool (mean of healthy replicas' scraped kv_cache_usage_perc). Runs only when /metrics is scraped.
// Thread: main.
import type { GatewayConfig } from '../config/schema.ts';
import { ReplicaRow } from '../registry/replica-table.ts';
import type { ReplicaRegistry } from '../registry/replica-registry.ts';
import type { MetricSources } from './metrics.ts';

export function fleetGaugeSources(registry: ReplicaRegistry, cfg: () => GatewayConfig): MetricSources {
  const row = new ReplicaRow();
  function* slots(): Iterable<[string, number]> {
    for (const pool of cfg().pools) {
      for (const slot of registry.candidates(pool.id)) yield [pool.id, slot];
    }
  }
  return {
    replicaUp: function* () {
      for (const [, slot] of slots()) yield [registry.replica(slot).id, registry.isHealthy(slot) ? 1 : 0];
    },
    replicaStalenessSeconds: function* () {
      const now = Date.now();
      for (const [, slot] of slots()) {
        const last = registry.table.lastGoodScrapeMs(slot);
        if (last > 0) yield [registry.replica(slot).id, Math.max(0, (now - last) / 1000)];
      }
    },
    kvOccupancy: function* () {
      const sum = new Map<string, [number, number]>();
      for (const [pool, slot] of slots()) {
        if (!registry.isHealthy(slot) || !registry.table.read(slot, row) || Number.isNaN(row.kvUsage)) continue;
        const acc = sum.get(pool) ?? [0, 0];
        acc[0] += row.kvUsage;
        acc[1] += 1;
        sum.set(pool, acc);
      }
      for (const [pool, [total, n]] of sum) yield [pool, total / n];
    },
  };
}
