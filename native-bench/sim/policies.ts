// Which routing policies the simulator runs and how it builds one: every name the config schema's
// routing.policy enum offers (so a policy added to the schema is simulated without touching this file),
// built by the router's own createPolicy from a gateway config that names it, over one gateway's fleet view
// (each gateway gets its own prefix index and learned rates, as separate gateway processes would); plus
// `random`, a floor that exists only here (random-policy.ts).
// Thread: the run's. Setup only.
import { configSchema, type GatewayConfig } from '../../src/config/schema.ts';
import { LLMD_REFRESH_MS } from '../../src/router/policies/llm-d.ts';
import type { GpuTimeModel } from '../../src/gpu-time/gpu-time-model.ts';
import type { PrefixIndex } from '../../src/router/prefix-index.ts';
import { createPolicy } from '../../src/router/route.ts';
import type { FleetView, RoutingFeedback, RoutingPolicy } from '../../src/router/types.ts';
import { RandomPolicy } from './random-policy.ts';

/** Policies only the simulator has: their config carries a schema policy, and this map says which it really is. */
const SIM_ONLY = ['random'] as const;
const simOnly = new WeakMap<GatewayConfig, string>();
const RANDOM_SEED = 0x7a11d0;

/** The routing.policy enum of the config schema, in its declared order. */
export function policyNames(): string[] {
  return [...configSchema.shape.routing.unwrap().shape.policy.unwrap().options];
}

/** Every name --policies accepts: the schema's and the simulator's own. */
export function simPolicyNames(): string[] {
  return [...policyNames(), ...SIM_ONLY];
}

/**
 * The config with routing.policy set to `name` (params kept). The llm-d anchors scrape at llm-d's own
 * metrics refresh (50 ms), not the gateway's registry interval: that is what their router sees upstream.
 */
export function withPolicy(cfg: GatewayConfig, name: string): GatewayConfig {
  if ((SIM_ONLY as readonly string[]).includes(name)) {
    // The schema's type needs one of its own names; buildPolicy reads the real one from the map.
    const out: GatewayConfig = { ...cfg, routing: { ...cfg.routing, policy: 'round-robin' } };
    simOnly.set(out, name);
    return out;
  }
  if (!policyNames().includes(name)) throw new RangeError(`unknown policy ${name}; the schema offers ${policyNames().join(', ')}`);
  const policy = name as GatewayConfig['routing']['policy'];
  const registry = policy === 'llm-d' || policy === 'llm-d-precise' ? { ...cfg.registry, scrape_interval_ms: LLMD_REFRESH_MS } : cfg.registry;
  return { ...cfg, routing: { ...cfg.routing, policy }, registry };
}

/** The policy a config from withPolicy names. */
export function policyOf(cfg: GatewayConfig): string {
  return simOnly.get(cfg) ?? cfg.routing.policy;
}

/** One gateway's policy instance over its own fleet view; `index`: the prefix index kv-aware reads (else its own). */
export function buildPolicy(cfg: GatewayConfig, fleet: FleetView, gpu?: GpuTimeModel, index?: PrefixIndex): RoutingPolicy & RoutingFeedback {
  if (simOnly.get(cfg) === 'random') return new RandomPolicy(RANDOM_SEED);
  return createPolicy(cfg, fleet, index, gpu);
}
