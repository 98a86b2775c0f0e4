// A stand-in gateway process for the multi-process quota tests: its own Redis connection and a
// RedisQuotaStore per job. Started with the Redis URL as argv[2]; prints "ready", then runs one job per
// JSON line on stdin and answers each with one JSON line. Jobs:
//   hammer: `loops` concurrent request loops until durationMs has passed
//   hold:   takes one lease and keeps it (the test then kills this process)
//   settle: settles the given request ids all at once
import { createInterface } from 'node:readline';
import { createRedisClient } from '../../../src/quota/redis-client.ts';
import { RedisQuotaStore } from '../../../src/quota/redis-quota-store.ts';
import type { TenantLimits } from '../../../src/quota/types.ts';

export interface ChildArgs {
  mode: 'hammer' | 'hold' | 'settle';
  prefix: string;
  limits: TenantLimits;
  leaseTtlMs: number;
  /** Key of a plain counter: INCR after each admission, DECR before its settle (observed in-flight count). */
  counterKey?: string;
  loops?: number;
  durationMs?: number;
  holdMinMs?: number;
  holdMaxMs?: number;
  costMin?: number;
  costMax?: number;
  /** used = cost x usedFraction: the rest is refunded at settle. */
  usedFraction?: number;
  requestIds?: string[];
  reservedTokens?: number;
  usedTokens?: number;
}

export interface HammerResult {
  admitted: number;
  admittedTokens: number;
  refundedTokens: number;
  refusedTokens: number;
  refusedConcurrency: number;
  maxObservedInflight: number;
  settledByMe: number;
}

const client = createRedisClient(process.argv[2]!, { connectTimeoutMs: 2000, commandTimeoutMs: 2000 });
await new Promise((r) => client.once('ready', r));
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const between = (lo: number, hi: number): number => lo + Math.floor(Math.random() * (hi - lo + 1));

async function run(args: ChildArgs): Promise<unknown> {
  const store = new RedisQuotaStore(client, { keyPrefix: args.prefix, leaseTtlMs: args.leaseTtlMs, sharedClient: true });
  if (args.mode === 'hold') {
    const d = await store.acquire(args.limits, 'held-by-child', 1);
    return { ok: d.ok, atMs: Date.now() };
  }
  if (args.mode === 'settle') {
    const results = await Promise.all(args.requestIds!.map((id) => store.settleOnce(args.limits, id, args.reservedTokens!, args.usedTokens!)));
    return { settledByMe: results.filter(Boolean).length };
  }
  const r: HammerResult = { admitted: 0, admittedTokens: 0, refundedTokens: 0, refusedTokens: 0, refusedConcurrency: 0, maxObservedInflight: 0, settledByMe: 0 };
  const endMs = Date.now() + args.durationMs!;
  let n = 0;
  const loop = async (): Promise<void> => {
    while (Date.now() < endMs) {
      const id = `${process.pid}-${n++}`;
      const cost = between(args.costMin!, args.costMax!);
      const d = await store.acquire(args.limits, id, cost);
      if (!d.ok) {
        if (d.code === 'concurrency_limit_exceeded') r.refusedConcurrency++;
        else r.refusedTokens++;
        await sleep(between(2, 6)); // keep the shared machine's CPU for others
        continue;
      }
      r.admitted++;
      r.admittedTokens += cost;
      const inflight = await client.incr(args.counterKey!);
      if (inflight > r.maxObservedInflight) r.maxObservedInflight = inflight;
      await sleep(between(args.holdMinMs!, args.holdMaxMs!));
      await client.decr(args.counterKey!);
      const used = Math.floor(cost * args.usedFraction!);
      if (await store.settleOnce(args.limits, id, cost, used)) {
        r.settledByMe++;
        r.refundedTokens += cost - used;
      }
    }
  };
  await Promise.all(Array.from({ length: args.loops! }, loop));
  return r;
}

const lines = createInterface({ input: process.stdin });
lines.on('line', (line) => {
  run(JSON.parse(line) as ChildArgs).then(
    (result) => process.stdout.write(`${JSON.stringify(result)}\n`),
    (err: unknown) => process.stdout.write(`${JSON.stringify({ error: String(err) })}\n`),
  );
});
lines.once('close', () => void client.quit());
process.stdout.write('ready\n');
