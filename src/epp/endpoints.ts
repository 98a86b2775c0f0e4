// Replicas as Envoy names them: `host:port` (what x-gateway-destination-endpoint carries and a subset hint
// lists). Maps the pool's slots to those names and back, and ranks fallbacks after the primary.
// Thread: main. Once per pick: a walk over the pool's members (tens), no allocation beyond the answer string.
import type { Router } from '../router/route.ts';
import type { RouteRequest } from '../router/types.ts';
import type { RegistryStage } from '../pipeline/services.ts';

/** `http://10.0.0.7:8000` → `10.0.0.7:8000` (replica urls have no path: the config schema says so). */
export function hostPort(url: string): string {
  const at = url.indexOf('://');
  return at < 0 ? url : url.slice(at + 3);
}

export class EndpointBook {
  private readonly registry: RegistryStage;
  private readonly poolId: string;
  /** url → host:port, filled as urls are first seen (a replica's url never changes while it holds a slot). */
  private readonly names = new Map<string, string>();

  constructor(registry: RegistryStage, poolId: string) {
    this.registry = registry;
    this.poolId = poolId;
  }

  name(slot: number): string {
    const url = this.registry.replica(slot).url;
    let n = this.names.get(url);
    if (n === undefined) this.names.set(url, (n = hostPort(url)));
    return n;
  }

  /** The pool's slots whose host:port is in `hint` (empty when none is). */
  slotsOf(hint: readonly string[]): number[] {
    const out: number[] = [];
    const members = this.registry.candidates(this.poolId);
    for (let i = 0; i < members.length; i++) if (hint.includes(this.name(members[i]!))) out.push(members[i]!);
    return out;
  }

  /** True when some member of the pool is healthy (the readiness answer). */
  anyHealthy(): boolean {
    const members = this.registry.candidates(this.poolId);
    for (let i = 0; i < members.length; i++) if (this.registry.isHealthy(members[i]!)) return true;
    return false;
  }

  /**
   * `primary[,fallback…]`: the primary's name, then up to `n` more, each the routing policy's pick for the same
   * request with the replicas already named excluded: the same ranking the primary won, read down. Envoy tries
   * them in order when the connection to an earlier one fails.
   */
  withFallbacks(router: Router, req: RouteRequest | null, primary: number, n: number): string {
    let value = this.name(primary);
    if (n === 0 || req === null) return value;
    const excluded = req.excluded.includes(primary) ? [...req.excluded] : [...req.excluded, primary];
    const probe: RouteRequest = { ...req, excluded };
    for (let i = 0; i < n; i++) {
      const r = router.route(probe);
      if (!r.ok) break;
      value += ',' + this.name(r.slot);
      excluded.push(r.slot);
    }
    return value;
  }
}
