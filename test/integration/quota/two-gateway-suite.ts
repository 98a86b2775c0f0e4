// The two-gateway quota cases, run on one Redis (two-gateways.test.ts) and on Redis Cluster
// (redis-cluster.test.ts): two processes, each with its own RedisQuotaStore and connection, sharing one
// tenant: the limits hold across processes, settle is exactly once, a killed process's lease expires.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { after, before, test } from 'node:test';
import type { RedisClient } from '../../../src/quota/redis-client.ts';
import { RedisQuotaStore } from '../../../src/quota/redis-quota-store.ts';
import type { TenantLimits } from '../../../src/quota/types.ts';
import type { ChildArgs, HammerResult } from './quota-child.ts';
import { nodeEntry } from '../../helpers/node-entry.ts';

const CHILD = nodeEntry('./quota-child', import.meta.url);

/** A child gateway process: send it a job, get its JSON answer. */
class Child {
  readonly proc: ChildProcess;
  private readonly queue: string[] = [];
  private readonly waiters: Array<{ resolve: (l: string) => void; reject: (e: Error) => void }> = [];

  constructor(url: string) {
    this.proc = spawn(process.execPath, [...CHILD, url], { stdio: ['pipe', 'pipe', 'inherit'] });
    createInterface({ input: this.proc.stdout! }).on('line', (l) => {
      const w = this.waiters.shift();
      if (w) w.resolve(l);
      else this.queue.push(l);
    });
    this.proc.once('exit', (code, signal) => {
      for (const w of this.waiters.splice(0)) w.reject(new Error(`child exited (${code ?? signal})`));
    });
  }

  next(): Promise<string> {
    const l = this.queue.shift();
    if (l !== undefined) return Promise.resolve(l);
    return new Promise((resolve, reject) => this.waiters.push({ resolve, reject }));
  }

  send(job: ChildArgs): void {
    this.proc.stdin!.write(`${JSON.stringify(job)}\n`);
  }

  async run<T>(job: ChildArgs): Promise<T> {
    this.send(job);
    const out = JSON.parse(await this.next()) as T & { error?: string };
    if (out.error !== undefined) throw new Error(`child: ${out.error}`);
    return out;
  }

  kill(): void {
    if (this.proc.exitCode === null && this.proc.signalCode === null) this.proc.kill('SIGKILL');
  }
}

export interface SharedRedis {
  readonly client: RedisClient;
  freshPrefix(): string;
}

/** Registers the cases (prefixed by `label`) and the two child processes (hooks of the calling file). */
export function twoGatewayCases(label: string, url: string, redis: SharedRedis): void {
  const freshPrefix = (): string => redis.freshPrefix();
  // Two processes for the whole file: starting one costs ~1-3 s of tsx start-up on this machine.
  const children: Child[] = [];
  before(async () => {
    children.push(new Child(url), new Child(url));
    for (const c of children) assert.equal(await c.next(), 'ready');
  });
  after(() => {
    for (const c of children) c.kill();
  });

  async function redisNowMs(): Promise<number> {
    const [s, us] = await redis.client.time();
    return Number(s) * 1000 + Number(us) / 1000;
  }

  void test(label + 'two processes hammering one tenant never take more than burst + rate x elapsed', async (t) => {
    const prefix = freshPrefix();
    const limits: TenantLimits = { name: 'acme', tokensPerSecond: 4000, burstTokens: 3000, maxInflight: 1000 };
    const args: ChildArgs = {
      mode: 'hammer', prefix, limits, leaseTtlMs: 60_000, counterKey: `${prefix}:inflight`,
      loops: 6, durationMs: 1500, holdMinMs: 0, holdMaxMs: 4, costMin: 50, costMax: 400, usedFraction: 0.5,
    };
    const startMs = await redisNowMs();
    const results = await Promise.all(children.map((c) => c.run<HammerResult>(args)));
    const elapsedS = ((await redisNowMs()) - startMs) / 1000;

    const net = results.reduce((s, r) => s + r.admittedTokens - r.refundedTokens, 0);
    const bound = limits.burstTokens + limits.tokensPerSecond * elapsedS;
    t.diagnostic(`net tokens taken ${net} <= bound ${bound.toFixed(0)} over ${elapsedS.toFixed(2)} s; ` +
      `admitted ${results.map((r) => r.admitted).join('+')}, refused for tokens ${results.map((r) => r.refusedTokens).join('+')}`);
    assert.ok(net <= bound, `took ${net} tokens, bound ${bound}`);
    assert.ok(results.every((r) => r.admitted > 0), 'both processes were admitted');
    assert.ok(results.reduce((s, r) => s + r.refusedTokens, 0) > 0, 'the bucket ran dry: the limit was exercised');
    assert.ok(net >= bound * 0.5, `the load reached the limit (${net} of ${bound.toFixed(0)})`);
    assert.equal(await redis.client.zcard(`${prefix}:{acme}:leases`), 0, 'every lease released');
  });

  void test(label + 'two processes never hold more leases than max_inflight at once', async (t) => {
    const prefix = freshPrefix();
    const limits: TenantLimits = { name: 'acme', tokensPerSecond: 1e6, burstTokens: 1e6, maxInflight: 5 };
    const args: ChildArgs = {
      mode: 'hammer', prefix, limits, leaseTtlMs: 60_000, counterKey: `${prefix}:inflight`,
      loops: 6, durationMs: 1500, holdMinMs: 5, holdMaxMs: 25, costMin: 1, costMax: 10, usedFraction: 1,
    };
    const results = await Promise.all(children.map((c) => c.run<HammerResult>(args)));
    const maxSeen = Math.max(...results.map((r) => r.maxObservedInflight));
    t.diagnostic(`max observed in flight ${maxSeen}; admitted ${results.map((r) => r.admitted).join('+')}, ` +
      `refused for concurrency ${results.map((r) => r.refusedConcurrency).join('+')}`);
    assert.ok(maxSeen <= limits.maxInflight, `observed ${maxSeen} in flight`);
    assert.equal(maxSeen, limits.maxInflight, 'the cap was reached');
    assert.ok(results.every((r) => r.refusedConcurrency > 0 && r.admitted > 0));
    assert.equal(await redis.client.zcard(`${prefix}:{acme}:leases`), 0, 'every lease released');
  });

  void test(label + 'settle is exactly once when two processes settle the same requests concurrently', async (t) => {
    const prefix = freshPrefix();
    const limits: TenantLimits = { name: 'acme', tokensPerSecond: 0.001, burstTokens: 10_000, maxInflight: 100 };
    const store = new RedisQuotaStore(redis.client, { keyPrefix: prefix, leaseTtlMs: 60_000, sharedClient: true });
    const ids = Array.from({ length: 50 }, (_, i) => `req-${i}`);
    for (const id of ids) assert.equal((await store.acquire(limits, id, 100)).ok, true);
    const args: ChildArgs = { mode: 'settle', prefix, limits, leaseTtlMs: 60_000, requestIds: ids, reservedTokens: 100, usedTokens: 40 };
    const settled = (await Promise.all(children.map((c) => c.run<{ settledByMe: number }>(args)))).map((r) => r.settledByMe);
    t.diagnostic(`settled by each process: ${settled.join(' + ')}`);
    assert.equal(settled[0]! + settled[1]!, ids.length);
    const d = await store.acquire(limits, 'after', 0);
    assert.equal(d.remainingTokens, 10_000 - 50 * 100 + 50 * 60, 'each refund applied once');
    assert.equal(d.remainingRequests, 99);
  });

  void test(label + "a live process's lease outlives its ttl by renewal; a killed process's lease expires one ttl later", async (t) => {
    const prefix = freshPrefix();
    const leaseTtlMs = 1500; // renewed every 500 ms by the holder
    const limits: TenantLimits = { name: 'acme', tokensPerSecond: 1000, burstTokens: 1000, maxInflight: 1 };
    // The last test of the file: it kills one of the two processes.
    const child = children[1]!;
    const held = await child.run<{ ok: boolean; atMs: number }>({ mode: 'hold', prefix, limits, leaseTtlMs });
    assert.equal(held.ok, true);
    const store = new RedisQuotaStore(redis.client, { keyPrefix: prefix, leaseTtlMs, sharedClient: true, renewLeases: false });
    await new Promise((r) => setTimeout(r, 2 * leaseTtlMs));
    const stillHeld = await store.acquire(limits, 'mine', 1);
    assert.equal(!stillHeld.ok && stillHeld.code, 'concurrency_limit_exceeded', 'renewed past its first ttl');

    child.kill();
    const killedAtMs = Date.now();
    const refusedNow = await store.acquire(limits, 'mine', 1);
    assert.equal(!refusedNow.ok && refusedNow.code, 'concurrency_limit_exceeded');
    assert.ok(!refusedNow.ok && refusedNow.retryAfterSeconds <= 2, 'retry-after never beyond the lease expiry');
    for (;;) {
      const d = await store.acquire(limits, 'mine', 1);
      if (d.ok) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    const waitedMs = Date.now() - killedAtMs;
    t.diagnostic(`slot free again ${waitedMs} ms after the holder was killed (held ${killedAtMs - held.atMs} ms in all)`);
    // the last renewal came at most 500 ms (+ scheduling) before the kill
    assert.ok(waitedMs < leaseTtlMs + 500, `waited ${waitedMs} ms`);
  });
}
