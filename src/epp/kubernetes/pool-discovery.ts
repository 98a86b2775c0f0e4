// The pool's replicas from its pods: a pod is a replica while it is Running, Ready, not being deleted, and
// has an IP; its id is the pod's name and its url http://POD_IP:target_port (the InferencePool's target port).
// Changes are gathered for a short moment (a rollout moves many pods at once) and applied as one config reload,
// which the registry turns into slots joining and leaving as for a file edit.
// Thread: main. Off the request path.
import type { EppConfig, GatewayConfig, ReplicaConfig } from '../../config/schema.ts';
import { replicaSchema } from '../../config/schema.ts';
import { PodWatch, type Pod } from './pod-watch.ts';

/** Pod events within this window are applied together. */
const SETTLE_MS = 50;

type KubernetesConfig = NonNullable<EppConfig['kubernetes']>;

export interface DiscoveryHooks {
  log: { info(o: object, m?: string): void; warn(o: object, m?: string): void };
  /** Re-applies the running config; the gateway's reload calls apply() below on it. */
  apply(): Promise<void>;
}

export class PoolDiscovery {
  private readonly watch: PodWatch;
  private readonly poolId: string;
  private readonly port: number;
  private readonly hooks: DiscoveryHooks;
  private replicas: ReplicaConfig[] = [];
  private key = '';
  private timer: NodeJS.Timeout | null = null;

  constructor(k: KubernetesConfig, poolId: string, hooks: DiscoveryHooks) {
    this.poolId = poolId;
    this.port = k.target_port;
    this.hooks = hooks;
    this.watch = new PodWatch(k, (pods) => this.changed(pods), (message) => hooks.log.warn({ component: 'epp-discovery' }, message));
  }

  start(): void {
    this.watch.start();
  }

  stop(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.watch.stop();
  }

  /** `cfg` with the pool's replicas replaced by the ready pods. */
  apply(cfg: GatewayConfig): GatewayConfig {
    return { ...cfg, pools: cfg.pools.map((p) => (p.id === this.poolId ? { ...p, replicas: this.replicas } : p)) };
  }

  private changed(pods: ReadonlyMap<string, Pod>): void {
    const next: ReplicaConfig[] = [];
    for (const pod of pods.values()) {
      const url = podUrl(pod, this.port);
      if (url !== null) next.push(replicaSchema.parse({ id: pod.metadata.name, url }));
    }
    next.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    const key = next.map((r) => `${r.id}=${r.url}`).join(' ');
    if (key === this.key) return;
    this.key = key;
    this.replicas = next;
    if (this.timer !== null) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.hooks.log.info({ component: 'epp-discovery', pool: this.poolId, replicas: this.replicas.map((r) => r.id) }, 'pool membership changed');
      void this.hooks.apply();
    }, SETTLE_MS);
  }
}

/** The replica url of a pod that can serve now; null when it cannot. */
export function podUrl(pod: Pod, port: number): string | null {
  if (pod.metadata.deletionTimestamp !== undefined) return null;
  const st = pod.status;
  if (st?.phase !== 'Running' || st.podIP === undefined || st.podIP === '') return null;
  if (!(st.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True')) return null;
  return `http://${st.podIP.includes(':') ? `[${st.podIP}]` : st.podIP}:${port}`;
}
