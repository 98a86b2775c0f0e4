// Starts a real gateway (the production wiring from src/gateway.ts, uWS on port 0) in front of real mock
// replicas on loopback, with a JSONL usage sink in a temp dir. Every resource is released by close().
// Thread: main (test process).
import { mkdtempSync, readFileSync, existsSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createHash } from 'node:crypto';
import { parseConfig } from '../../src/config/load.ts';
import type { GatewayConfig } from '../../src/config/schema.ts';
import { startGateway, type Gateway, type StartOptions } from '../../src/gateway.ts';
import { createLogger } from '../../src/logging/logger.ts';
import { startMockReplica, type MockOptions, type MockReplica } from './mock-replicas.ts';
import type { UsageRecord } from '../../src/usage/usage-record.ts';

export const ALPHA_KEY = 'sk-test-alpha';
export const TINY_KEY = 'sk-test-tiny';
const sha = (k: string): string => createHash('sha256').update(k).digest('hex');

export interface TestPool {
  id: string;
  model: string;
  aliases?: string[];
  adapters?: string[];
  maxContextTokens?: number;
  /** The pool's `engine` figures (the GPU-time model's starting point); absent, the schema's 8B defaults. */
  engine?: Record<string, unknown>;
  /** pools[].tokenizer and pools[].chat_template (the config defaults when absent). */
  tokenizer?: string | { path: string };
  chatTemplate?: string;
  /** One entry per replica: mock options, plus the adapters the gateway config says it hosts. */
  replicas: Array<MockOptions & { configAdapters?: string[] }>;
}

export interface StackOptions {
  pools?: TestPool[];
  /** Merged into the config object before validation. */
  config?: Record<string, unknown>;
  /** Mock replicas started by the caller (e.g. child processes): pool id → urls. */
  externalReplicas?: Record<string, string[]>;
  /** The gateway's routing policy instead of the configured one (StartOptions.routingPolicy). */
  routingPolicy?: StartOptions['routingPolicy'];
  /** The gateway's logger (default: silent). */
  logger?: StartOptions['logger'];
  /** The environment the config is read with and the gateway starts with (default: none, not the test's own). */
  env?: Record<string, string | undefined>;
}

export interface TestStack {
  gateway: Gateway;
  url: string;
  cfg: GatewayConfig;
  replicas: Map<string, MockReplica>;
  usagePath: string;
  /** Usage records written so far (the sink is flushed first). */
  usage(): Promise<UsageRecord[]>;
  close(): Promise<void>;
}

export const DEFAULT_POOL: TestPool = {
  id: '8b',
  model: 'llama-3.1-8b-instruct',
  aliases: ['gpt-fast'],
  replicas: [{ profile: 'tiny', model: 'llama-3.1-8b-instruct' }, { profile: 'tiny', model: 'llama-3.1-8b-instruct' }],
};

/**
 * routing settings for a test gateway, in a stack or a config file of its own: 65,536 entries (8.5 and 3 MiB)
 * hold every block a test sends; the defaults' million (136 and 48 MiB) are faulted in at startup
 * (src/util/prefault.ts), ~0.5 s of CPU and as much of the kernel's per gateway that the suite does not need.
 */
export const TEST_INDEX_SIZES = { prefix_index_entries: 65_536, kv_events_entries: 65_536 } as const;

let stacks = 0;

export async function startStack(opts: StackOptions = {}): Promise<TestStack> {
  const pools = opts.pools ?? [DEFAULT_POOL];
  const dir = mkdtempSync(join(tmpdir(), 'expediter-test-'));
  const usagePath = join(dir, 'usage.jsonl');
  const replicas = new Map<string, MockReplica>();
  const poolCfgs: Array<Record<string, unknown>> = [];
  try {
    for (const pool of pools) {
      const reps: Array<Record<string, unknown>> = [];
      for (let i = 0; i < pool.replicas.length; i++) {
        const { configAdapters, ...mockOpts } = pool.replicas[i]!;
        const id = `${pool.id}-${i + 1}`;
        const r = await startMockReplica({ model: pool.model, ...mockOpts });
        replicas.set(id, r);
        reps.push({ id, url: r.url, ...(configAdapters ? { adapters: configAdapters } : {}), ...(mockOpts.kvEvents !== undefined ? { kv_events: mockOpts.kvEvents } : {}) });
      }
      for (const [j, url] of (opts.externalReplicas?.[pool.id] ?? []).entries()) reps.push({ id: `${pool.id}-x${j + 1}`, url });
      poolCfgs.push({
        id: pool.id, model: pool.model, aliases: pool.aliases ?? [], adapters: pool.adapters ?? [],
        max_context_tokens: pool.maxContextTokens ?? 2048, default_max_tokens: 64, replicas: reps,
        ...(pool.engine ? { engine: pool.engine } : {}),
        ...(pool.tokenizer !== undefined ? { tokenizer: pool.tokenizer } : {}),
        ...(pool.chatTemplate !== undefined ? { chat_template: pool.chatTemplate } : {}),
      });
    }
    const raw: Record<string, unknown> = {
      server: { host: '127.0.0.1', port: 0, shutdown_grace_ms: 2000 },
      upstream: { connect_timeout_ms: 1000, first_token_timeout_ms: 5000, max_attempts: 3 },
      registry: { scrape_interval_ms: 50, scrape_timeout_ms: 2000, down_after_failures: 2 },
      pools: poolCfgs,
      tenants: [
        { name: 'alpha', api_keys: [{ sha256: sha(ALPHA_KEY) }], tokens_per_second: 1_000_000, burst_tokens: 10_000_000, max_inflight: 256 },
        { name: 'tiny', api_keys: [{ sha256: sha(TINY_KEY) }], tokens_per_second: 100, burst_tokens: 4000, max_inflight: 2 },
      ],
      usage: { sinks: [`jsonl:${usagePath}`] },
      expose_route_header: true,
      ...opts.config,
      // Merged into a test's own routing section, which would otherwise replace the small indexes.
      routing: { ...TEST_INDEX_SIZES, ...(opts.config?.routing as Record<string, unknown> | undefined) },
      // No tokenize worker unless the test configures the tokenizer: a worker thread's start (tiktoken, the
      // warm-up) costs ~0.5-1.5 s of CPU per stack, and a test's short prompts are encoded inline anyway. Tests of
      // the worker path, its metrics and its cancellation set `tokenizer` themselves.
      tokenizer: opts.config?.tokenizer ?? { threads: 0 },
    };
    const cfg = parseConfig(raw, opts.env);
    const gateway = await startGateway(cfg, { ...(opts.env ? { env: opts.env } : {}), logger: opts.logger ?? createLogger('silent'), metricsChannel: `test-metrics-${process.pid}-${++stacks}`, ...(opts.routingPolicy ? { routingPolicy: opts.routingPolicy } : {}) });
    // The poller thread needs a moment (more on a loaded machine) for its first scrape of every replica.
    try {
      await waitFor(async () => (await fetch(`${gateway.url}/readyz`)).status === 200, 15000, 25);
    } catch (err) {
      await gateway.close(0);
      throw err;
    }
    return {
      gateway,
      url: gateway.url,
      cfg,
      replicas,
      usagePath,
      async usage() {
        await gateway.services.usage.flush();
        if (!existsSync(usagePath)) return [];
        // Complete lines only: a record finishing meanwhile (a later request's) may be half written when read.
        const text = readFileSync(usagePath, 'utf8');
        return text.slice(0, text.lastIndexOf('\n') + 1).split('\n').filter(Boolean).map((l) => JSON.parse(l) as UsageRecord);
      },
      async close() {
        await gateway.close(1000);
        await Promise.all([...replicas.values()].map((r) => r.close()));
        rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    await Promise.all([...replicas.values()].map((r) => r.close()));
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}

/** Polls `fn` until it returns a truthy value or `timeoutMs` passes. */
export async function waitFor<T>(fn: () => T | Promise<T>, timeoutMs = 2000, stepMs = 10): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, stepMs));
  }
}
