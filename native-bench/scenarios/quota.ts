// Quota scenario (issue 6): what does the quota step (acquire before dispatch + settle at the end) cost
// per request at the design's rate (5,000 req/s), in gateway CPU and in Redis round trips and Redis CPU,
// for the in-memory store against Redis, raw and behind the failure-policy wrapper?
// Method: an open-loop pacer issues acquire -> settle pairs at --rate for --seconds per run; runs of every
// variant alternate order over --rounds, side by side in one process. `noop` (a store that answers from a
// constant) measures the pacer itself; the quota step's cost is a variant minus noop. Redis figures come from
// INFO commandstats / INFO cpu deltas of a private redis-server (or --redis-url, noisier when shared).
// Thread: bench main thread; redis-server is its own process.
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { parseArgs } from 'node:util';
import type { BenchScenario } from '../types.ts';
import { Authenticator, hashApiKey } from '../../src/auth/authenticate.ts';
import { MemoryQuotaStore } from '../../src/quota/memory-quota-store.ts';
import { SharedQuotaStore } from '../../src/quota/shared-quota-store.ts';
import { SharedQuotaTable } from '../../src/quota/shared-quota-table.ts';
import { createQuotaStore } from '../../src/quota/create-quota-store.ts';
import { createRedisClient, type RedisClient } from '../../src/quota/redis-client.ts';
import { RedisQuotaStore } from '../../src/quota/redis-quota-store.ts';
import type { QuotaDecision, QuotaStore, TenantLimits } from '../../src/quota/types.ts';

interface RunResult {
  requests: number;
  seconds: number;
  cpuUsPerReq: number;
  redisCallsPerReq: number;
  redisCpuUsPerReq: number;
  p50Us: number;
  p99Us: number;
  refused: number;
}

const NOOP_DECISION: QuotaDecision = Object.freeze({
  ok: true, degraded: false, limitTokens: 1, remainingTokens: 1, resetSeconds: 0, limitRequests: 1, remainingRequests: 1,
});
const noopStore: QuotaStore = {
  acquire: () => Promise.resolve(NOOP_DECISION),
  settle: () => Promise.resolve(),
  close: () => Promise.resolve(),
};

const quota: BenchScenario = async (args) => {
  const { values } = parseArgs({
    args,
    options: {
      rate: { type: 'string', default: '5000' },
      seconds: { type: 'string', default: '2' },
      rounds: { type: 'string', default: '2' },
      tenants: { type: 'string', default: '100' },
      'redis-url': { type: 'string' },
      pipelined: { type: 'boolean', default: false },
    },
  });
  const rate = Number(values.rate);
  const seconds = Number(values.seconds);
  const rounds = Number(values.rounds);
  const tenants: TenantLimits[] = Array.from({ length: Number(values.tenants) }, (_, i) =>
    // max_inflight 1,000: never reached at this pace (a few in flight per tenant), and it sizes the shared table (4 MB).
    Object.freeze({ name: `bench-${i}`, tokensPerSecond: 1e9, burstTokens: 1e9, maxInflight: 1000 }));
  const sharedTable = SharedQuotaTable.create(tenants);

  let stopRedis = async (): Promise<void> => undefined;
  let url = values['redis-url'];
  if (url === undefined) {
    const own = await startRedisServer();
    url = own.url;
    stopRedis = own.stop;
  }
  const admin = createRedisClient(url, { connectTimeoutMs: 2000, commandTimeoutMs: 5000 });
  await new Promise((r) => admin.once('ready', r));
  const prefix = `bench:${process.pid}:${Date.now()}`;
  const raw = createRedisClient(url, { connectTimeoutMs: 2000, commandTimeoutMs: 1000 });
  const redisStore = new RedisQuotaStore(raw, { keyPrefix: `${prefix}:raw`, leaseTtlMs: 600_000 });
  const rawUncorked = createRedisClient(url, { connectTimeoutMs: 2000, commandTimeoutMs: 1000 });
  const uncorkedStore = new RedisQuotaStore(rawUncorked, { keyPrefix: `${prefix}:uncorked`, leaseTtlMs: 600_000, coalesceWrites: false });
  // --pipelined adds ioredis auto-pipelining as a variant. It measures no gain here: each batch is a
  // new pipeline whose first script call is sent as a full EVAL, and the batches are small.
  const piped = values.pipelined ? createRedisClient(url, { connectTimeoutMs: 2000, commandTimeoutMs: 1000, autoPipelining: true }) : null;
  const policyStore = await createQuotaStore({
    backend: 'redis', redis_url: url, failure_mode: 'open', timeout_ms: 50, lease_ttl_ms: 600_000, expected_gateways: 1, key_prefix: `${prefix}:policy`,
  });
  for (const c of [raw, rawUncorked, ...(piped ? [piped] : [])]) if (c.status !== 'ready') await new Promise((r) => c.once('ready', r));
  const variants: Array<[string, QuotaStore]> = [
    ['noop (pacer only)', noopStore],
    ['memory', new MemoryQuotaStore({ leaseTtlMs: 600_000 })],
    // What each acceptor thread runs with server.threads > 1 (here one thread, so its locks are never contended).
    ['memory, shared table', new SharedQuotaStore(sharedTable, sharedTable.slotMap(), { leaseTtlMs: 600_000 })],
    ['redis', redisStore],
    ['redis, one write per command', uncorkedStore],
    ...(piped ? [['redis, auto-pipelined', new RedisQuotaStore(piped, { keyPrefix: `${prefix}:piped`, leaseTtlMs: 600_000 })] as [string, QuotaStore]] : []),
    ['redis + failure policy', policyStore],
  ];

  const results = new Map<string, RunResult[]>(variants.map(([n]) => [n, []]));
  // warm-up: JIT, script load on each connection
  for (const [, store] of variants) await runPaced(store, tenants, rate, 0.3, admin);
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? variants : [...variants].reverse();
    for (const [name, store] of order) results.get(name)!.push(await runPaced(store, tenants, rate, seconds, admin));
  }
  const auth = measureAuth();

  for (const [, store] of variants) await store.close();
  const keys = await admin.keys(`${prefix}:*`);
  for (let i = 0; i < keys.length; i += 500) await admin.del(...keys.slice(i, i + 500));
  await admin.quit();
  await stopRedis();

  const mean = (rs: RunResult[], f: (r: RunResult) => number): number => rs.reduce((s, r) => s + f(r), 0) / rs.length;
  const noopCpu = mean(results.get(variants[0]![0])!, (r) => r.cpuUsPerReq);
  const memTotal = mean(results.get('memory')!, (r) => r.cpuUsPerReq);
  const rows: Array<Array<string | number>> = [];
  for (const [name] of variants) {
    const rs = results.get(name)!;
    const cpu = mean(rs, (r) => r.cpuUsPerReq);
    const step = name.startsWith('noop') ? 0 : cpu - noopCpu;
    rows.push([
      name,
      (mean(rs, (r) => r.requests / r.seconds)).toFixed(0),
      `${cpu.toFixed(1)} (${rs.map((r) => r.cpuUsPerReq.toFixed(1)).join(', ')})`,
      name.startsWith('noop') ? '-' : step.toFixed(1),
      name.startsWith('noop') ? '-' : (cpu / memTotal).toFixed(2),
      mean(rs, (r) => r.redisCallsPerReq).toFixed(2),
      mean(rs, (r) => r.redisCpuUsPerReq).toFixed(1),
      mean(rs, (r) => r.p50Us).toFixed(0),
      mean(rs, (r) => r.p99Us).toFixed(0),
      rs.reduce((s, r) => s + r.refused, 0),
    ]);
  }
  rows.push(['auth: SHA-256 + lookup per request', '-', auth.toFixed(2), auth.toFixed(2), '-', '0', '0', '-', '-', 0]);

  return {
    title: `Quota step cost per request (acquire + settle) at ${rate} req/s: memory vs Redis`,
    columns: ['variant', 'achieved req/s', 'gateway CPU us/req (per round)', 'quota step CPU us/req (minus noop)',
      'gateway CPU / memory\'s', 'Redis round trips/req', 'Redis CPU us/req', 'acquire p50 us', 'acquire p99 us', 'refused'],
    rows,
    notes: [
      `${rounds} rounds of ${seconds} s per variant, alternating order; ${tenants.length} tenants round-robin, limits never reached.`,
      'CPU from process.cpuUsage (user+sys) over each run; Redis CPU and round trips from INFO cpu / INFO commandstats deltas.',
      values['redis-url'] ? `Redis: ${values['redis-url']} (shared: its CPU figures include other clients)` : 'Redis: a private redis-server on loopback.',
      'The machine is shared (2 cores, other engineers\' jobs): compare rows of one run, not runs of different days.',
    ],
    extra: { results: Object.fromEntries(results), authUsPerOp: auth },
  };
};

export default quota;

async function runPaced(store: QuotaStore, tenants: TenantLimits[], rate: number, seconds: number, admin: RedisClient): Promise<RunResult> {
  const total = Math.round(rate * seconds);
  const latUs = new Float64Array(total);
  let issued = 0;
  let done = 0;
  let refused = 0;
  const before = await redisCounters(admin);
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await new Promise<void>((resolve) => {
    const one = (i: number): void => {
      const tenant = tenants[i % tenants.length]!;
      const id = `r${i}`;
      const start = performance.now();
      store.acquire(tenant, id, 2100).then((d) => {
        latUs[i] = (performance.now() - start) * 1000;
        if (!d.ok) refused++;
        return d.ok ? store.settle(tenant, id, 2100, 1900) : undefined;
      }).then(() => {
        if (++done === total) resolve();
      }, (err: unknown) => {
        console.error(err);
        if (++done === total) resolve();
      });
    };
    // Open loop: every tick issues whatever is due by now, so a slow store cannot slow the arrivals.
    const tick = (): void => {
      const due = Math.min(total, Math.floor((performance.now() - t0) / 1000 * rate));
      while (issued < due) one(issued++);
      if (issued < total) setTimeout(tick, 1);
    };
    tick();
  });
  const elapsedS = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const after = await redisCounters(admin);
  const sorted = Array.from(latUs).sort((a, b) => a - b);
  return {
    requests: total,
    seconds: elapsedS,
    cpuUsPerReq: (cpu.user + cpu.system) / total,
    // minus the two INFO calls of the measurement itself
    redisCallsPerReq: Math.max(0, after.calls - before.calls) / total,
    redisCpuUsPerReq: (after.cpuS - before.cpuS) * 1e6 / total,
    p50Us: sorted[Math.floor(total * 0.5)]!,
    p99Us: sorted[Math.floor(total * 0.99)]!,
    refused,
  };
}

async function redisCounters(admin: RedisClient): Promise<{ calls: number; cpuS: number }> {
  const stats = await admin.info('commandstats');
  const cpuInfo = await admin.info('cpu');
  let calls = 0;
  for (const m of stats.matchAll(/^cmdstat_(evalsha|eval):calls=(\d+)/gm)) calls += Number(m[2]);
  const user = Number(/used_cpu_user:([\d.]+)/.exec(cpuInfo)?.[1] ?? 0);
  const sys = Number(/used_cpu_sys:([\d.]+)/.exec(cpuInfo)?.[1] ?? 0);
  return { calls, cpuS: user + sys };
}

/** CPU per authenticate() call with 1,000 configured keys (SHA-256 of the presented key + Map lookup). */
function measureAuth(): number {
  const tenants = Array.from({ length: 1000 }, (_, i) => ({
    name: `t${i}`, api_keys: [{ sha256: hashApiKey(`sk-bench-${i}`) }], tokens_per_second: 1, burst_tokens: 1, max_inflight: 1,
    sla_tier: 'standard' as const, allowed_models: [],
  }));
  const auth = new Authenticator(tenants, {});
  const headers = tenants.map((_, i) => `Bearer sk-bench-${i}`);
  let found = 0;
  for (let i = 0; i < 20_000; i++) if (auth.authenticate(headers[i % 1000])) found++;
  const n = 100_000;
  const cpu0 = process.cpuUsage();
  for (let i = 0; i < n; i++) if (auth.authenticate(headers[i % 1000])) found++;
  const cpu = process.cpuUsage(cpu0);
  if (found !== n + 20_000) throw new Error('authenticate missed a key');
  return (cpu.user + cpu.system) / n;
}

async function startRedisServer(): Promise<{ url: string; stop: () => Promise<void> }> {
  const port = await new Promise<number>((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const a = srv.address();
      const p = typeof a === 'object' && a !== null ? a.port : 0;
      srv.close(() => resolve(p));
    });
  });
  const proc = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
  const url = `redis://127.0.0.1:${port}`;
  const probe = createRedisClient(url, { connectTimeoutMs: 500, commandTimeoutMs: 500 });
  await new Promise((r) => probe.once('ready', r));
  await probe.quit();
  return {
    url,
    stop: async () => {
      const exited = new Promise((r) => proc.once('exit', r));
      proc.kill('SIGTERM');
      await exited;
    },
  };
}
