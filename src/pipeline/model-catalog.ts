// Resolves a request's `model` to a pool and an optional LoRA adapter, and renders GET /v1/models and
// GET /v1/models/{id} (one entry of the list, the same object).
// Built once per config (setup); a lookup is one Map.get. Thread: main.
import type { GatewayConfig, PoolConfig } from '../config/schema.ts';

export interface ModelTarget {
  readonly pool: PoolConfig;
  readonly adapter: string | null;
}

export class ModelCatalog {
  private readonly byName = new Map<string, ModelTarget>();
  readonly pools: ReadonlyMap<string, PoolConfig>;
  /** Pre-serialised GET /v1/models body. */
  readonly modelsBody: string;
  /** Pre-serialised GET /v1/models/{id} bodies: every id the list names (models, aliases, adapters). */
  private readonly modelBodies = new Map<string, string>();

  constructor(cfg: GatewayConfig, createdSeconds = Math.floor(Date.now() / 1000)) {
    const pools = new Map<string, PoolConfig>();
    const data: Array<Record<string, unknown>> = [];
    for (const pool of cfg.pools) {
      pools.set(pool.id, pool);
      const base: ModelTarget = Object.freeze({ pool, adapter: null });
      this.byName.set(pool.model, base);
      data.push({ id: pool.model, object: 'model', created: createdSeconds, owned_by: 'expediter', root: pool.model, parent: null, max_model_len: pool.max_context_tokens });
      for (const alias of pool.aliases) {
        this.byName.set(alias, base);
        data.push({ id: alias, object: 'model', created: createdSeconds, owned_by: 'expediter', root: pool.model, parent: null, max_model_len: pool.max_context_tokens });
      }
      for (const adapter of pool.adapters) {
        this.byName.set(adapter, Object.freeze({ pool, adapter }));
        data.push({ id: adapter, object: 'model', created: createdSeconds, owned_by: 'expediter', root: adapter, parent: pool.model, max_model_len: null });
      }
    }
    this.pools = pools;
    this.modelsBody = JSON.stringify({ object: 'list', data });
    for (const m of data) this.modelBodies.set(m.id as string, JSON.stringify(m));
  }

  /** The model object of GET /v1/models/{id}, or undefined for an id the list does not name. */
  modelBody(id: string): string | undefined {
    return this.modelBodies.get(id);
  }

  resolve(model: string): ModelTarget | undefined {
    return this.byName.get(model);
  }
}
