// The loopback Redis Cluster the quota tests share: 3 masters + 3 replicas on the six ports in
// REDIS_CLUSTER_PORTS (set by scripts/test.ts, which starts a cluster of its own on free ports when none answers
// on 7000-7005), else on 7000-7005. .ci/redis-cluster.sh starts and checks it: availability, a stable topology
// (every master with a synced replica that every node's CLUSTER SLOTS lists), failover, cleanup.
// Missing cluster: the tests skip with the reason, except under CI=true, where they fail.
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { closeRedisClient, createRedisClient, type RedisClient } from '../../src/quota/redis-client.ts';

function clusterPorts(): readonly number[] {
  const raw = process.env.REDIS_CLUSTER_PORTS;
  if (raw === undefined || raw.trim() === '') return [7000, 7001, 7002, 7003, 7004, 7005];
  const ports = raw.split(/[\s,]+/).filter(Boolean).map(Number);
  if (ports.length !== 6 || ports.some((p) => !Number.isInteger(p) || p <= 0)) throw new Error(`REDIS_CLUSTER_PORTS needs six ports: ${raw}`);
  return ports;
}

export const CLUSTER_PORTS = clusterPorts();
/** Seeds in the syntax of quota.redis_cluster: any one that answers finds the rest. */
export const CLUSTER_SEEDS = CLUSTER_PORTS.slice(0, 3).map((p) => `127.0.0.1:${p}`);
/** Three seeds in the comma syntax of quota.redis_url. */
export const CLUSTER_URL = `redis://${CLUSTER_SEEDS.join(',')}`;
const SCRIPT = fileURLToPath(new URL('../../.ci/redis-cluster.sh', import.meta.url));

/**
 * Starts the nodes that are not answering and waits until the topology is stable (.ci/redis-cluster.sh start:
 * idempotent, and a no-op beyond the check on a stable cluster). Returns null when it is up, else why not;
 * under CI=true a cluster that cannot be started throws instead, so CI never passes by skipping.
 */
export function ensureCluster(): string | null {
  // the script reads REDIS_CLUSTER_PORTS itself, and without it uses 7000-7005 and their usual data dir
  const r = spawnSync(SCRIPT, ['start'], { encoding: 'utf8', timeout: 60_000 });
  if (r.status === 0) return null;
  const why = `Redis Cluster on 127.0.0.1:${CLUSTER_PORTS.join(',')} unavailable (${SCRIPT} start: ${(r.stderr || String(r.error ?? '')).trim().split('\n').pop()})`;
  if (process.env.CI === 'true') throw new Error(why);
  return why;
}

export interface ClusterNodeInfo {
  id: string;
  port: number;
  master: boolean;
  /** For a replica: the id of its master. */
  masterId: string | null;
  failed: boolean;
}

/** A connection to one node (not the cluster client): for CLUSTER NODES / FAILOVER / SCRIPT FLUSH on that node. */
export async function nodeClient(port: number): Promise<RedisClient> {
  const c = createRedisClient(`redis://127.0.0.1:${port}`, { connectTimeoutMs: 2000, commandTimeoutMs: 5000 });
  await waitReady(c);
  return c;
}

export async function withNode<T>(port: number, fn: (c: RedisClient) => Promise<T>): Promise<T> {
  const c = await nodeClient(port);
  try {
    return await fn(c);
  } finally {
    await closeRedisClient(c);
  }
}

/** The topology as `port` sees it. */
export async function clusterNodes(port: number = CLUSTER_PORTS[0]): Promise<ClusterNodeInfo[]> {
  const text = await withNode(port, (c) => c.call('CLUSTER', 'NODES') as Promise<string>);
  return text.trim().split('\n').map((line) => {
    const [id, addr, flags, masterId] = line.split(' ');
    return {
      id: id!, port: Number(/:(\d+)@/.exec(addr!)![1]), master: flags!.includes('master'),
      masterId: masterId === '-' ? null : masterId!, failed: /fail/.test(flags!),
    };
  });
}

/** The port of the master serving `key`, and of one replica of it. */
export async function ownerOf(client: RedisClient, key: string): Promise<{ master: number; replica: number }> {
  const slot = Number(await client.call('CLUSTER', 'KEYSLOT', key));
  const slots = await client.call('CLUSTER', 'SLOTS') as Array<[number, number, ...Array<[string, number]>]>;
  const range = slots.find(([lo, hi]) => slot >= lo && slot <= hi);
  if (!range || range.length < 4) throw new Error(`slot ${slot} has no master with a replica`);
  return { master: Number(range[2]![1]), replica: Number(range[3]![1]) };
}

/**
 * Manual failover (`CLUSTER FAILOVER` on the replica): the master stops taking writes, the replica catches up
 * with its replication offset and takes over, so no acknowledged write is lost. Resolves when every node
 * sees `replica` as a master and the cluster is ok again; returns how long that took.
 */
export async function failover(replica: number): Promise<number> {
  const t0 = performance.now();
  await withNode(replica, (c) => c.call('CLUSTER', 'FAILOVER'));
  return waitPromoted(replica, CLUSTER_PORTS, t0);
}

/**
 * Unplanned failover: SIGKILL the master (no shutdown, no last replication), wait until the surviving nodes
 * have promoted `replica`, then restart the dead node (it rejoins as a replica). Returns the ms until promoted.
 */
export async function killMaster(master: number, replica: number): Promise<number> {
  const info = await withNode(master, (c) => c.call('INFO', 'server') as Promise<string>);
  const pid = Number(/process_id:(\d+)/.exec(info)![1]);
  const t0 = performance.now();
  process.kill(pid, 'SIGKILL');
  return waitPromoted(replica, CLUSTER_PORTS.filter((p) => p !== master), t0);
}

async function waitPromoted(replica: number, ports: readonly number[], t0: number): Promise<number> {
  const deadline = t0 + 15_000;
  for (;;) {
    const views = await Promise.all(ports.map(async (p) => (await clusterNodes(p)).find((n) => n.port === replica)?.master === true));
    const ok = await Promise.all(ports.map((p) => withNode(p, async (c) => /cluster_state:ok/.test(await c.call('CLUSTER', 'INFO') as string))));
    if (views.every(Boolean) && ok.every(Boolean)) return performance.now() - t0;
    if (performance.now() > deadline) throw new Error(`failover to ${replica} not complete after 15 s`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export interface TestCluster {
  readonly client: RedisClient;
  /** A new `test:<uuid>` key prefix, cleaned up by close(). */
  freshPrefix(): string;
  /** Deletes every key under the prefixes handed out (on every master), then quits. */
  close(): Promise<void>;
}

export async function connectTestCluster(): Promise<TestCluster> {
  const client = createRedisClient(CLUSTER_URL, { connectTimeoutMs: 2000, commandTimeoutMs: 5000 });
  await waitReady(client);
  const prefixes: string[] = [];
  return {
    client,
    freshPrefix: () => {
      const p = `test:${randomUUID()}`;
      prefixes.push(p);
      return p;
    },
    close: async () => {
      const cleanup = async (): Promise<void> => {
        for (const { port } of (await clusterNodes()).filter((n) => n.master && !n.failed)) {
          const keys = await withNode(port, (c) => Promise.all(prefixes.map((p) => c.keys(`${p}:*`))));
          // one DEL per key: keys of different tenants live in different slots
          for (const key of keys.flat()) await client.del(key);
        }
      };
      // After a master was killed the client may hold a command that waits on a slot map it never refreshes:
      // the cleanup gets 15 s, then the client is dropped either way, so the test process can exit.
      let timer: NodeJS.Timeout | undefined;
      const gaveUp = new Promise<void>((resolve) => { timer = setTimeout(resolve, 15_000); });
      await Promise.race([cleanup().catch(() => undefined), gaveUp]);
      clearTimeout(timer);
      await Promise.race([closeRedisClient(client), new Promise<void>((resolve) => setTimeout(resolve, 2_000).unref())]);
      client.disconnect(false);
    },
  };
}

function waitReady(c: RedisClient): Promise<void> {
  if (c.status === 'ready') return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('Redis (cluster) not ready after 5 s')), 5000);
    c.once('ready', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}
