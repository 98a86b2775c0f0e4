// Where the quota and usage store lives: one Redis, or a Redis Cluster given by seed nodes. Parsed here (no
// ioredis import) so config loading rejects a bad endpoint before anything connects. Thread: main, setup only.
// Syntax:
//   quota.redis_url: redis://[user:pass@]host:port[/db]              one Redis (ioredis parses the URL)
//   quota.redis_url: redis://[user:pass@]h1:p1,h2:p2[,...]            a cluster: two or more comma-separated nodes
//   quota.redis_cluster: [h1:p1, h2:p2, ...]                          a cluster (one seed is enough)
// `rediss://` turns on TLS for every node. A cluster has only database 0, so a cluster URL takes no /db.

export interface ClusterNode {
  host: string;
  port: number;
}

export type RedisEndpoint =
  | { kind: 'single'; url: string }
  | { kind: 'cluster'; nodes: ClusterNode[]; username?: string; password?: string; tls: boolean };

export class RedisEndpointError extends Error {
  override name = 'RedisEndpointError';
}

/** One `host:port` (IPv6 as `[::1]:7000`); the port is required, since cluster nodes rarely listen on 6379 alone. */
export function parseClusterNode(spec: string): ClusterNode {
  const m = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9._-]+):(\d{1,5})$/.exec(spec.trim());
  const port = m ? Number(m[2]) : 0;
  if (!m || port < 1 || port > 65535) throw new RedisEndpointError(`"${spec}" is not host:port`);
  const host = m[1]!.startsWith('[') ? m[1]!.slice(1, -1) : m[1]!;
  return { host, port };
}

/**
 * The endpoint of the quota config: `redis_cluster` if given, else `redis_url` (a comma in its host part
 * makes it a cluster). Throws RedisEndpointError naming the key at fault.
 */
export function redisEndpoint(redisUrl: string | undefined, redisCluster: readonly string[] | undefined): RedisEndpoint {
  if (redisCluster !== undefined && redisCluster.length > 0) {
    if (redisUrl !== undefined) throw new RedisEndpointError('quota.redis_url and quota.redis_cluster: set one, not both');
    try {
      return { kind: 'cluster', nodes: redisCluster.map(parseClusterNode), tls: false };
    } catch (err) {
      throw new RedisEndpointError(`quota.redis_cluster: ${(err as Error).message}`);
    }
  }
  if (redisUrl === undefined || redisUrl === '') throw new RedisEndpointError('quota.redis_url or quota.redis_cluster: required when quota.backend is redis');
  return parseRedisUrl(redisUrl);
}

/** `redis://` or `rediss://`; several comma-separated host:port make a cluster URL. */
export function parseRedisUrl(url: string): RedisEndpoint {
  const m = /^(rediss?):\/\/(?:([^@/]*)@)?([^/?#]+)(\/[^?#]*)?$/.exec(url);
  if (!m) throw new RedisEndpointError(`quota.redis_url: "${redact(url)}" is not redis://[user:pass@]host:port[,host:port...][/db]`);
  const hosts = m[3]!.split(',');
  if (hosts.length === 1) return { kind: 'single', url };
  const path = m[4] ?? '';
  if (path !== '' && path !== '/' && path !== '/0') throw new RedisEndpointError('quota.redis_url: a cluster has only database 0; drop the /db');
  let nodes: ClusterNode[];
  try {
    nodes = hosts.map(parseClusterNode);
  } catch (err) {
    throw new RedisEndpointError(`quota.redis_url: ${(err as Error).message}`);
  }
  const endpoint: RedisEndpoint = { kind: 'cluster', nodes, tls: m[1] === 'rediss' };
  if (m[2] !== undefined && m[2] !== '') {
    const colon = m[2].indexOf(':');
    const user = decodeURIComponent(colon < 0 ? m[2] : m[2].slice(0, colon));
    const pass = colon < 0 ? '' : decodeURIComponent(m[2].slice(colon + 1));
    // redis://:pass@ is the password-only form (AUTH pass); redis://user@ without a password is a username alone.
    if (user !== '') endpoint.username = user;
    if (pass !== '') endpoint.password = pass;
  }
  return endpoint;
}

/** The endpoint for logs and errors: never the password. */
export function describeEndpoint(e: RedisEndpoint): string {
  if (e.kind === 'single') return redact(e.url);
  return `cluster ${e.nodes.map((n) => (n.host.includes(':') ? `[${n.host}]:${n.port}` : `${n.host}:${n.port}`)).join(',')}`;
}

function redact(url: string): string {
  return url.replace(/\/\/([^@/]*):[^@/]*@/, '//$1:***@');
}
