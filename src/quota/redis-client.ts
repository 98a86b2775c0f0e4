// The one module that imports ioredis (ESLint enforces it): builds a client that never makes a caller wait on
// a dead Redis, for one Redis or a Redis Cluster (redis-endpoint.ts says which). Thread: main. Setup only,
// except the script runner returned by defineScript (hot path).
// Choices, and what they cost:
// - enableOfflineQueue false: while disconnected a command fails at once instead of queueing behind a
//   reconnect; callers (the resilient quota store, the usage sink) decide what a failure means.
// - commandTimeout: a connected but stalled Redis (paused, overloaded) rejects each command after
//   commandTimeoutMs; ioredis arms one timer per command for this.
// - maxRetriesPerRequest 0 and no auto-resend: a command in flight when the socket drops fails rather than
//   running twice after the reconnect. The client reconnects by itself with a capped backoff (retryStrategy).
// - Cluster: ioredis's Cluster client routes each command by its key's slot and follows MOVED/ASK itself
//   (the command did not run on the node that answered so, so resending is safe). It would also resend a
//   command whose node connection closed mid-flight (retryDelayOnFailover) and one refused with CLUSTERDOWN:
//   both are off in ioredis, because a script that ran on a master that then died may have run (an acquire
//   sent twice would find its own lease and refuse); the caller sees the failure and the quota store's
//   failure policy compensates exactly as for one Redis. Cost: requests on a failed master's slots degrade
//   (fail open or closed) until its replica is promoted (cluster-node-timeout, seconds), instead of waiting.
// - CLUSTERDOWN itself is a refusal before anything ran (a node answers so while it trusts no owner for the
//   slot, e.g. for a moment while a manual failover's new configuration spreads), so defineScript's runner
//   resends it, every CLUSTERDOWN_RETRY_MS while within commandTimeoutMs of the first send. Ours, not
//   ioredis's retryDelayOnClusterDown: that one would resend a command its caller had already seen time out.
import { performance } from 'node:perf_hooks';
import { Cluster, Redis } from 'ioredis';
import { parseRedisUrl, type RedisEndpoint } from './redis-endpoint.ts';

export type RedisClient = Redis | Cluster;

export interface RedisClientOptions {
  /** TCP connect timeout per attempt; a failed attempt is retried with backoff. */
  connectTimeoutMs: number;
  /** Every command rejects after this long without a reply. */
  commandTimeoutMs: number;
  /** Do not connect until the first command or connect() (default false: connect now). */
  lazy?: boolean;
  /** Longest pause between reconnect attempts (default 1000 ms). */
  maxReconnectDelayMs?: number;
  /** Batch the commands issued in one event-loop turn into one write (ioredis enableAutoPipelining). */
  autoPipelining?: boolean;
  /** Connection errors (ECONNREFUSED, timeouts); without it they are swallowed, never printed. */
  onError?: (err: Error) => void;
}

/** `endpoint`: a URL (several comma-separated nodes make it a cluster) or a parsed endpoint. */
export function createRedisClient(endpoint: string | RedisEndpoint, opts: RedisClientOptions): RedisClient {
  const target = typeof endpoint === 'string' ? parseRedisUrl(endpoint) : endpoint;
  const client = target.kind === 'single' ? createSingle(target.url, opts) : createCluster(target, opts);
  // ioredis prints unhandled 'error' events to stderr on every reconnect attempt; route them instead.
  const onError = opts.onError ?? (() => undefined);
  client.on('error', onError);
  // a Cluster reports each node's connection errors separately ('node error', with the node's address)
  if (client instanceof Cluster) client.on('node error', onError);
  return client;
}

function createSingle(url: string, opts: RedisClientOptions): Redis {
  const maxDelayMs = opts.maxReconnectDelayMs ?? 1000;
  return new Redis(url, {
    connectTimeout: opts.connectTimeoutMs,
    commandTimeout: opts.commandTimeoutMs,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    autoResendUnfulfilledCommands: false,
    enableReadyCheck: true,
    lazyConnect: opts.lazy ?? false,
    enableAutoPipelining: opts.autoPipelining ?? false,
    // 50, 100, 200 ... ms, capped: forever, so the store recovers by itself when Redis returns.
    retryStrategy: (attempt: number) => Math.min(50 * 2 ** Math.min(attempt, 10), maxDelayMs),
  });
}

/** How long a cluster client's script runner keeps resending a command refused with CLUSTERDOWN (its command timeout). */
const clusterDownBudgetMs = new WeakMap<Cluster, number>();
/** Pause between CLUSTERDOWN resends: ioredis's TRYAGAIN delay, a few gossip rounds on loopback. */
const CLUSTERDOWN_RETRY_MS = 20;

function createCluster(target: Extract<RedisEndpoint, { kind: 'cluster' }>, opts: RedisClientOptions): Cluster {
  const maxDelayMs = opts.maxReconnectDelayMs ?? 1000;
  const cluster = new Cluster(target.nodes, {
    enableOfflineQueue: false,
    enableReadyCheck: true,
    lazyConnect: opts.lazy ?? false,
    enableAutoPipelining: opts.autoPipelining ?? false,
    // See the header: never resend what may have run. MOVED/ASK (did not run) are still followed at once.
    retryDelayOnFailover: 0,
    retryDelayOnClusterDown: 0,
    retryDelayOnTryAgain: 20,
    // A slot map refresh (after MOVED or a node loss) waits at most this long for CLUSTER SLOTS.
    slotsRefreshTimeout: Math.max(1000, opts.connectTimeoutMs),
    // Whole cluster unreachable: reconnect forever with the same capped backoff as one Redis.
    clusterRetryStrategy: (attempt: number) => Math.min(50 * 2 ** Math.min(attempt, 10), maxDelayMs),
    // Per node. ioredis forces retryStrategy null (a lost node is replaced from the slot map, not redialled)
    // and an offline queue per node (a command waits for that node's connect, bounded by commandTimeout).
    redisOptions: {
      connectTimeout: opts.connectTimeoutMs,
      commandTimeout: opts.commandTimeoutMs,
      maxRetriesPerRequest: 0,
      autoResendUnfulfilledCommands: false,
      ...(target.username !== undefined ? { username: target.username } : {}),
      ...(target.password !== undefined ? { password: target.password } : {}),
      ...(target.tls ? { tls: {} } : {}),
    },
  });
  clusterDownBudgetMs.set(cluster, opts.commandTimeoutMs);
  return cluster;
}

export type RedisArg = string | number;
/** Runs one registered Lua script: EVALSHA, with EVAL on the first use per connection and on NOSCRIPT. */
export type ScriptRunner = (keys: readonly string[], args: readonly RedisArg[]) => Promise<unknown>;

/** Clients closeRedisClient was called on: the script runner sends nothing more through them. */
const closing = new WeakSet<RedisClient>();

/**
 * Registers `lua` under `name` with defineCommand (ioredis sends EVAL once per connection, EVALSHA after,
 * and falls back to EVAL on NOSCRIPT, e.g. after SCRIPT FLUSH) and returns a typed runner for it.
 */
export function defineScript(client: RedisClient, name: string, lua: string, numberOfKeys: number): ScriptRunner {
  client.defineCommand(name, { numberOfKeys, lua });
  // defineCommand adds a method ioredis's types cannot know about: this cast is the boundary adapter.
  const command = (client as unknown as Record<string, (...args: RedisArg[]) => Promise<unknown>>)[name]!;
  const budgetMs = client instanceof Cluster ? clusterDownBudgetMs.get(client) : undefined;
  if (budgetMs === undefined) return (keys, args) => command.call(client, ...keys, ...args);
  // Cluster: one extra promise per call for the catch; a success pays nothing else.
  const send = (keys: readonly string[], args: readonly RedisArg[], firstSentMs: number): Promise<unknown> =>
    command.call(client, ...keys, ...args).catch((err: unknown) => {
      // The resend gets a command timeout of its own: a node that refuses, then hangs, costs 2 x timeout at worst.
      // Never after closeRedisClient: a command sent then could open a node connection nothing closes.
      if (!isClusterDown(err) || closing.has(client) || performance.now() - firstSentMs + CLUSTERDOWN_RETRY_MS >= budgetMs) throw err;
      return new Promise<unknown>((resolve) => setTimeout(resolve, CLUSTERDOWN_RETRY_MS)).then(() => {
        if (closing.has(client)) throw err;
        return send(keys, args, firstSentMs);
      });
    });
  return (keys, args) => send(keys, args, performance.now());
}

function isClusterDown(err: unknown): boolean {
  return err instanceof Error && err.message.startsWith('CLUSTERDOWN');
}

/**
 * Coalesces the commands written in one event-loop turn into one socket write: the first command of a turn
 * corks the socket and a nextTick uncorks it, so N commands cost one writev instead of N write syscalls.
 * Measured with native-bench/scenarios/quota.ts (variant "redis, one write per command"). Call before
 * each command; costs one branch when already corked. Unlike ioredis auto-pipelining it keeps EVALSHA.
 */
export function writeCoalescer(client: RedisClient): () => void {
  let corked: Redis['stream'] | null = null;
  const uncork = (): void => {
    corked?.uncork();
    corked = null;
  };
  // A Cluster writes to one socket per node, chosen per command by slot: nothing single to cork. Cost: the
  // cluster path pays one write per command (7-35% more quota CPU per request in the single-Redis bench).
  if (client instanceof Cluster) return () => undefined;
  return () => {
    if (corked !== null || client.status !== 'ready') return;
    corked = client.stream;
    corked.cork();
    process.nextTick(uncork);
  };
}

/** True when commands can be sent now (connected and past the ready check). */
export function isRedisReady(client: RedisClient): boolean {
  return client.status === 'ready';
}

/**
 * Closes the client: QUIT when connected (bounded by the command timeout), else drops the socket. A Cluster also
 * drops every node connection its pool still holds after QUIT: one a redirection opened while QUIT was on its
 * way would otherwise keep the process alive.
 */
export async function closeRedisClient(client: RedisClient): Promise<void> {
  closing.add(client);
  if (client.status === 'ready') {
    try {
      await client.quit();
      if (client instanceof Cluster) for (const node of client.nodes('all')) node.disconnect(false);
      return;
    } catch {
      // fall through to disconnect
    }
  }
  client.disconnect(false);
}
