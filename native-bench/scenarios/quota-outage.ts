// quota-outage scenario: what does a Redis outage cost each quota decision? Measured on the store the gateway
// builds (createQuotaStore: the Redis store behind the failure policy) against a private redis-server that each
// trial kills, pauses (SIGSTOP) and restarts:
// - killed, fail-open: one decision after the kill (the local share answers, degraded);
// - paused, fail-closed: each decision while the breaker is closed (one quota.timeout_ms each), then one with
//   the breaker open;
// - startup with Redis down: createQuotaStore's wait before serving (readyTimeoutMs);
// - recovery: from redis-server answering PING again to the first decision Redis makes.
// Reported, not asserted: test/integration/quota/redis-outage.test.ts asserts the behaviour (policy, breaker,
// compensation) and only lower bounds on the timeouts.
// Thread: bench main thread (the store and its ioredis client); redis-server is a child process.
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import type { BenchScenario } from '../types.ts';
import { createQuotaStore } from '../../src/quota/create-quota-store.ts';
import type { QuotaStore, TenantLimits } from '../../src/quota/types.ts';
import { OwnRedis, sleep } from '../../test/integration/quota/own-redis.ts';

const pct = (sorted: number[], p: number): number => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;
const limits: TenantLimits = Object.freeze({ name: 'bench', tokensPerSecond: 1000, burstTokens: 1e9, maxInflight: 1e6 });

const quotaOutage: BenchScenario = async (args) => {
  const { values } = parseArgs({
    args,
    options: {
      trials: { type: 'string', default: '10' },
      'timeout-ms': { type: 'string', default: '300' },
      'ready-timeout-ms': { type: 'string', default: '300' },
    },
  });
  const trials = Number(values.trials);
  const timeoutMs = Number(values['timeout-ms']);
  const readyTimeoutMs = Number(values['ready-timeout-ms']);
  const redis = await OwnRedis.start();
  const make = (failureMode: 'open' | 'closed'): Promise<QuotaStore> => createQuotaStore(
    { backend: 'redis', redis_url: redis.url, failure_mode: failureMode, timeout_ms: timeoutMs, lease_ttl_ms: 60_000, expected_gateways: 2, key_prefix: `bench:${randomUUID()}` },
    { readyTimeoutMs },
  );
  let n = 0;
  const decide = async (store: QuotaStore): Promise<{ ms: number; degraded: boolean; ok: boolean }> => {
    const id = `r${n++}`;
    const t0 = performance.now();
    const d = await store.acquire(limits, id, 1);
    const ms = performance.now() - t0;
    if (d.ok) await store.settle(limits, id, 1, 1);
    return { ms, degraded: d.ok && d.degraded === true, ok: d.ok };
  };
  /** Decisions until Redis makes one again; the time from `t0`. */
  const untilRedisDecides = async (store: QuotaStore, t0: number): Promise<number> => {
    for (;;) {
      const d = await decide(store);
      if (d.ok && !d.degraded) return performance.now() - t0;
      await sleep(5);
    }
  };
  const killedOpen: number[] = [];
  const pausedClosed: number[] = [];
  const breakerOpen: number[] = [];
  const startup: number[] = [];
  const recovery: number[] = [];
  try {
    for (let i = 0; i < trials; i++) {
      const open = await make('open');
      await untilRedisDecides(open, performance.now());
      await redis.kill();
      killedOpen.push((await decide(open)).ms);
      await redis.restart();
      recovery.push(await untilRedisDecides(open, performance.now()));
      await open.close();

      const closed = await make('closed');
      await untilRedisDecides(closed, performance.now());
      redis.pause();
      // Calls that wait one timeout each, until one comes back without waiting: the breaker opened.
      for (let k = 0; k < 10; k++) {
        const d = await decide(closed);
        if (d.ms < timeoutMs / 2) {
          breakerOpen.push(d.ms);
          break;
        }
        pausedClosed.push(d.ms);
      }
      redis.resume();
      await closed.close();

      await redis.kill();
      const t0 = performance.now();
      const late = await make('open');
      startup.push(performance.now() - t0);
      await redis.restart();
      await untilRedisDecides(late, performance.now());
      await late.close();
    }
  } finally {
    await redis.stop();
  }
  const rows: Array<Array<string | number>> = [];
  for (const [name, xs] of [
    ['killed, fail-open: one decision', killedOpen],
    [`paused, fail-closed: a decision before the breaker opens (timeout ${timeoutMs} ms)`, pausedClosed],
    ['paused, fail-closed: a decision with the breaker open', breakerOpen],
    [`startup with Redis down (readyTimeoutMs ${readyTimeoutMs})`, startup],
    ['recovery: redis-server answering to Redis deciding', recovery],
  ] as const) {
    const s = [...xs].sort((a, b) => a - b);
    rows.push([name, s.length, pct(s, 0).toFixed(2), pct(s, 0.5).toFixed(2), pct(s, 0.95).toFixed(2), pct(s, 1).toFixed(2)]);
  }
  return {
    title: 'Quota decisions during a Redis outage (ms)',
    columns: ['case', 'samples', 'min', 'p50', 'p95', 'max'],
    rows,
    notes: [
      'the store the gateway builds, one private redis-server killed, SIGSTOPped and restarted per trial',
      'a breaker-open decision is one that came back in under half the timeout; reported, not asserted',
    ],
    extra: { killedOpen, pausedClosed, breakerOpen, startup, recovery },
  };
};

export default quotaOutage;
