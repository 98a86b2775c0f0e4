// What a load scenario runs against: a URL the user gives (`--url`, with `--api-key` and `--model`), or a stack
// it starts itself: mock replicas (each its own process, time-scaled so the engines finish sooner) and the
// gateway (src/main.ts with a generated config: round-robin unless told otherwise, quota in memory, tenants as
// the scenario asks). Thread: bench main thread. Not on a hot path.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startGatewayProcess } from '../harness/gateway-process.ts';
import { startMockFleet } from '../harness/mock-fleet.ts';
import type { MockFleet } from '../harness/mock-fleet.ts';

export const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
export const MODEL = 'bench-model';
export const API_KEY = 'sk-bench-load';
/** A mock builds its tokenizer (~1 s alone) before answering /health; on a crowded machine that takes far longer. */
const READY_TIMEOUT_MS = 120_000;

export interface StackOptions {
  /** Use this gateway instead of starting one (no mocks started, no gateway CPU measured). */
  url?: string;
  replicas: number;
  profile: string;
  timeScale: number;
  mockArgs?: readonly string[];
  /** Top-level sections merged over the generated gateway config (`{"server":{"threads":2}}`). */
  gatewayConfig?: Record<string, unknown>;
  keepLogs?: boolean;
  /** The gateway runs with `--cpu-prof` and writes one .cpuprofile per thread here when it stops. */
  cpuProfDir?: string;
}

export interface Stack {
  gatewayUrl: string;
  /** The gateway's pid when this stack started it, for CPU and RSS; null for `--url`. */
  gatewayPid: number | null;
  fleet: MockFleet | null;
  logDir: string;
  stop(): Promise<void>;
}

/** Starts the stack, trying again (up to 3 times) when a child misses its readiness wait on a busy machine. */
export async function startStack(o: StackOptions): Promise<Stack> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startStackOnce(o);
    } catch (err) {
      if (attempt >= 3 || !/not ready after/.test((err as Error).message)) throw err;
      console.error(`stack start attempt ${attempt} failed (${(err as Error).message.split('\n')[0]}); retrying`);
    }
  }
}

async function startStackOnce(o: StackOptions): Promise<Stack> {
  const logDir = mkdtempSync(join(tmpdir(), 'expediter-load-'));
  const cleanup = (): void => { if (!o.keepLogs) rmSync(logDir, { recursive: true, force: true }); };
  if (o.url) return { gatewayUrl: o.url.replace(/\/+$/, ''), gatewayPid: null, fleet: null, logDir, stop: async () => cleanup() };
  const fleet = await startMockFleet({
    repoRoot, logDir, count: o.replicas, model: MODEL, profile: o.profile, timeScale: o.timeScale, extraArgs: o.mockArgs,
    readyTimeoutMs: READY_TIMEOUT_MS,
  });
  try {
    const gw = await startGatewayProcess({
      repoRoot, logDir, model: MODEL, apiKey: API_KEY, replicas: fleet.replicas, configOverrides: o.gatewayConfig,
      readyTimeoutMs: READY_TIMEOUT_MS, ...(o.cpuProfDir !== undefined ? { cpuProfDir: o.cpuProfDir } : {}),
    });
    return {
      gatewayUrl: gw.url, gatewayPid: gw.proc.pid, fleet, logDir,
      async stop() {
        await gw.stop();
        await fleet.stop();
        cleanup();
      },
    };
  } catch (err) {
    await fleet.stop();
    throw err;
  }
}

/** Resident set of a process in bytes (VmRSS), NaN when it is gone. */
export function rssBytes(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'latin1'));
    return m ? Number(m[1]) * 1024 : NaN;
  } catch {
    return NaN;
  }
}

/** The soft limit on open files of this process (a child inherits it). */
export function openFileLimit(): number {
  const m = /Max open files\s+(\d+)/.exec(readFileSync('/proc/self/limits', 'latin1'));
  return m ? Number(m[1]) : NaN;
}

/** Parses `--gateway-config` JSON; an empty string is no override. */
export function parseJsonFlag(s: string | undefined): Record<string, unknown> | undefined {
  if (!s) return undefined;
  return JSON.parse(s) as Record<string, unknown>;
}
