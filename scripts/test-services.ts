// The services `npm test` needs, found or started by scripts/test.ts: a Redis at REDIS_URL and a 3-master,
// 3-replica Redis Cluster. What answers is used as it is; what does not is started on free loopback ports
// (nothing persisted, data in a temp dir) and stopped again by stop().
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const CLUSTER_SCRIPT = fileURLToPath(new URL('../.ci/redis-cluster.sh', import.meta.url));
const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';
const DEFAULT_CLUSTER_PORTS = [7000, 7001, 7002, 7003, 7004, 7005];

export interface Service {
  /** Environment the test processes get (REDIS_URL, REDIS_CLUSTER_PORTS). */
  readonly env: Record<string, string>;
  /** One line for the log: what is used, and whether this run started it. */
  readonly describe: string;
  stop(): Promise<void>;
}

/** True when something at host:port answers PING like a Redis (+PONG, or an auth/protocol error). */
export function redisAnswers(host: string, port: number, timeoutMs = 1000): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = connect(port, host);
    let buf = '';
    const done = (ok: boolean): void => {
      sock.destroy();
      resolve(ok);
    };
    sock.setTimeout(timeoutMs, () => done(false));
    sock.once('error', () => done(false));
    sock.on('data', (d) => {
      buf += d.toString();
      if (buf.includes('\r\n')) done(buf.startsWith('+PONG') || buf.startsWith('-NOAUTH') || buf.startsWith('-ERR'));
    });
    sock.once('connect', () => sock.write('PING\r\n'));
  });
}

function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

/**
 * `count` consecutive free ports whose +10000 neighbours (a cluster node's bus port) are free too, from a
 * random base in 20000-29000 so that parallel runs rarely race for the same ports.
 */
export async function freePorts(count: number): Promise<number[]> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const base = 20000 + Math.floor(Math.random() * 9000);
    const ports = Array.from({ length: count }, (_, i) => base + i);
    const free = await Promise.all(ports.flatMap((p) => [portIsFree(p), portIsFree(p + 10000)]));
    if (free.every(Boolean)) return ports;
  }
  throw new Error(`no ${count} free consecutive ports in 20000-29000`);
}

function needRedisServer(): void {
  const r = spawnSync('redis-server', ['--version'], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error('redis-server is not installed: apt-get install redis-server (.ci/run does it)');
}

/**
 * The Redis at REDIS_URL (default redis://127.0.0.1:6379) when it answers. When nothing answers there, whether
 * REDIS_URL was set or not, a private redis-server on a free port, and the tests get its URL instead.
 */
export async function ensureRedis(): Promise<Service> {
  const configured = process.env.REDIS_URL ?? DEFAULT_REDIS_URL;
  const u = new URL(configured);
  if (u.protocol === 'redis:' && !u.hostname.includes(',') && await redisAnswers(u.hostname, Number(u.port || 6379))) {
    return { env: { REDIS_URL: configured }, describe: `Redis at ${configured}`, stop: () => Promise.resolve() };
  }
  needRedisServer();
  const [port] = await freePorts(1);
  const dir = mkdtempSync(join(tmpdir(), 'expediter-test-redis-'));
  const proc: ChildProcess = spawn('redis-server', [
    '--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir,
    '--daemonize', 'no', '--loglevel', 'warning', '--protected-mode', 'no',
  ], { stdio: 'ignore' });
  const deadline = Date.now() + 10_000;
  while (!(await redisAnswers('127.0.0.1', port!, 500))) {
    if (proc.exitCode !== null || Date.now() > deadline) throw new Error(`redis-server on ${port} did not start`);
    await new Promise((r) => setTimeout(r, 20));
  }
  const url = `redis://127.0.0.1:${port}`;
  return {
    env: { REDIS_URL: url },
    describe: `nothing answered at ${configured}: started redis-server at ${url}`,
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) {
        const exited = new Promise((r) => proc.once('exit', r));
        proc.kill('SIGTERM');
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Runs .ci/redis-cluster.sh without blocking: the static checks run meanwhile. */
function runClusterScript(cmd: 'start' | 'stop', env: Record<string, string>): Promise<{ ok: boolean; output: string }> {
  return new Promise((resolve) => {
    const proc = spawn(CLUSTER_SCRIPT, [cmd], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    proc.stdout.on('data', (d: Buffer) => { output += d.toString(); });
    proc.stderr.on('data', (d: Buffer) => { output += d.toString(); });
    const timer = setTimeout(() => proc.kill('SIGTERM'), 120_000);
    proc.once('error', (err) => {
      clearTimeout(timer);
      resolve({ ok: false, output: String(err) });
    });
    proc.once('close', (code) => {
      clearTimeout(timer);
      resolve({ ok: code === 0, output: output.trim() });
    });
  });
}

/**
 * The cluster at REDIS_CLUSTER_PORTS, or at 7000-7005 when a node there answers, checked (and healed: a node
 * that is down is restarted) by .ci/redis-cluster.sh start, which returns once the topology is stable. When
 * no node answers there, a cluster of its own on six free ports, created, waited for and stopped again.
 */
export async function ensureCluster(): Promise<Service> {
  const set = process.env.REDIS_CLUSTER_PORTS;
  const ports = set ? set.split(/[\s,]+/).filter(Boolean).map(Number) : DEFAULT_CLUSTER_PORTS;
  if (set || await redisAnswers('127.0.0.1', ports[0]!)) {
    const env = { REDIS_CLUSTER_PORTS: ports.join(' ') };
    const r = await runClusterScript('start', env);
    if (!r.ok) throw new Error(`the Redis Cluster on ${ports.join(',')} is not healthy:\n${r.output}`);
    return { env, describe: `Redis Cluster on 127.0.0.1:${ports.join(',')}`, stop: () => Promise.resolve() };
  }
  needRedisServer();
  const own = await freePorts(6);
  const dir = mkdtempSync(join(tmpdir(), 'expediter-test-cluster-'));
  const env = { REDIS_CLUSTER_PORTS: own.join(' '), REDIS_CLUSTER_DIR: dir };
  const r = await runClusterScript('start', env);
  const stop = async (): Promise<void> => {
    await runClusterScript('stop', env);
    rmSync(dir, { recursive: true, force: true });
  };
  if (!r.ok) {
    await stop();
    throw new Error(`could not start a Redis Cluster on ${own.join(',')}:\n${r.output}`);
  }
  // the test processes find the nodes by port; the data dir lets the helper restart a node a test killed
  return { env, describe: `nothing answered on 7000: started a Redis Cluster on 127.0.0.1:${own.join(',')}`, stop };
}
