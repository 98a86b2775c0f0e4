// Which routing policies the simulator runs and how it builds one: every name the config schema's
// routing.policy enum offers (so a policy added to the schema is simulated without touching this file),
// built by the router's own createPolicy from a gateway config that names it, over one gateway's fleet view
// (each gateway gets its own prefix index and learned rates, as separate gateway processes would).
// Thread: the run's. Setup only.
import { configSchema, type GatewayConfig } from '../../src/config/schema.ts';
import type { GpuTimeModel } from '../../src/gpu-time/gpu-time-model.ts';
import { createPolicy } from '../../src/router/route.ts';
import type { FleetView, RoutingFeedback, RoutingPolicy } from '../../src/router/types.ts';

/** The routing.policy enum of the config schema, in its declared order. */
export function policyNames(): string[] {
  return [...configSchema.shape.routing.unwrap().shape.policy.unwrap().options];
}

/** The config with routing.policy set to `name` (params kept). */
export function withPolicy(cfg: GatewayConfig, name: string): GatewayConfig {
  if (!policyNames().includes(name)) throw new RangeError(`unknown policy ${name}; the schema offers ${policyNames().join(', ')}`);
  return { ...cfg, routing: { ...cfg.routing, policy: name as GatewayConfig['routing']['policy'] } };
}

/** One gateway's policy instance over its own fleet view. */
export function buildPolicy(cfg: GatewayConfig, fleet: FleetView, gpu?: GpuTimeModel): RoutingPolicy & RoutingFeedback {
  return createPolicy(cfg, fleet, undefined, gpu);
}
