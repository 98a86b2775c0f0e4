// Endpoint-picker mode's composition: the ext_proc + health gRPC listener on epp.host:epp.port for epp.pool,
// over the gateway's request path, and (with epp.kubernetes) the pod discovery that sets the pool's replicas.
// gateway.ts starts it after the request path; a reload passes through withDiscovered() so the pool keeps the
// replicas Kubernetes reported, whatever the file lists.
// Thread: main. Setup, reload and health only; per request the work is in exchange.ts.
import type { EppConfig, GatewayConfig } from '../config/schema.ts';
import type { Services } from '../pipeline/services.ts';
import type { RegistryStage } from '../pipeline/services.ts';
import { EndpointBook } from './endpoints.ts';
import { eppBase, type EppBase } from './epp-services.ts';
import { Exchange } from './exchange.ts';
import { listenGrpc, NOT_SERVING, SERVICE_UNKNOWN, SERVING, type GrpcListener } from './grpc-transport.ts';
import { PoolDiscovery } from './kubernetes/pool-discovery.ts';

export interface EppParts {
  /** The gateway's current Services (replaced on each reload). */
  services(): Services;
  registry: RegistryStage;
  log: { info(o: object, m?: string): void; warn(o: object, m?: string): void; error(o: object, m?: string): void };
  /** Applies a config (the gateway's reload), for discovery's changes. */
  reload(cfg: GatewayConfig): Promise<void>;
}

export interface EppHandle {
  readonly port: number;
  /** `cfg` with the discovered pool's replicas in place of the file's (unchanged without epp.kubernetes). */
  withDiscovered(cfg: GatewayConfig): GatewayConfig;
  close(graceMs: number): Promise<void>;
}

const EXT_PROC_SERVICE = 'envoy.service.ext_proc.v3.ExternalProcessor';

export async function startEpp(epp: EppConfig, parts: EppParts): Promise<EppHandle> {
  const book = new EndpointBook(parts.registry, epp.pool);
  let from: Services | null = null;
  let base: EppBase | null = null;
  // Rebuilt when the gateway's services change (a reload), read as a plain field otherwise.
  const current = (): EppBase => {
    const s = parts.services();
    if (s !== from || base === null) {
      from = s;
      base = eppBase(s, s.cfg.epp ?? epp);
    }
    return base;
  };
  const env = { base: current, book };
  const ready = (): boolean => book.anyHealthy();
  const listener: GrpcListener = await listenGrpc(epp.host, epp.port, {
    process: (stream) => void new Exchange(stream, env),
    health: (service) => {
      if (service === 'liveness') return SERVING;
      if (service === '' || service === 'readiness' || service === EXT_PROC_SERVICE) return ready() ? SERVING : NOT_SERVING;
      return SERVICE_UNKNOWN;
    },
  });
  let discovery: PoolDiscovery | null = null;
  if (epp.kubernetes !== undefined) {
    discovery = new PoolDiscovery(epp.kubernetes, epp.pool, {
      log: parts.log,
      apply: async () => {
        await parts.reload(parts.services().cfg);
      },
    });
    discovery.start();
  }
  parts.log.info({ host: epp.host, port: listener.port, pool: epp.pool, discovery: discovery !== null ? 'kubernetes' : 'static' }, 'endpoint picker listening');
  return {
    port: listener.port,
    withDiscovered: (cfg) => (discovery === null ? cfg : discovery.apply(cfg)),
    async close(graceMs) {
      discovery?.stop();
      await listener.close(graceMs);
    },
  };
}
