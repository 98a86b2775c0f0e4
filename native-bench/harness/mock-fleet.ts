// Mock vLLM replicas for end-to-end benchmarks, each in its own process (`npm run mock`'s entry,
// test/mock-replica/cli.ts), on free loopback ports, ready when GET /health answers 200.
// Thread: bench main thread. Not on a hot path. The bench talks to the mock through its CLI flags only
// (the flags in test/mock-replica/README.md), so it does not depend on the mock's internals.
import { join } from 'node:path';
import { freePort, spawnTsx, waitForHttp } from './processes.ts';
import type { Proc } from './processes.ts';

export interface MockFleetOptions {
  repoRoot: string;
  logDir: string;
  count: number;
  model: string;
  /** `tiny` is the fast profile; see the contract's mock flags. */
  profile: string;
  /** In (0, 1]; small values shrink engine step times so the proxy, not the mock, is the bottleneck. */
  timeScale: number;
  extraArgs?: readonly string[];
  cpus?: string;
  /** How long each mock may take to answer /health (30 s; more on a crowded machine). */
  readyTimeoutMs?: number;
}

export interface MockReplica {
  id: string;
  /** `127.0.0.1:PORT`, the form nginx's upstream block wants. */
  hostPort: string;
  url: string;
  proc: Proc;
}

export interface MockFleet {
  replicas: MockReplica[];
  pids: number[];
  stop(): Promise<void>;
}

export async function startMockFleet(o: MockFleetOptions): Promise<MockFleet> {
  const replicas: MockReplica[] = [];
  const stop = async (): Promise<void> => { await Promise.all(replicas.map((r) => r.proc.stop())); };
  try {
    for (let i = 1; i <= o.count; i++) {
      const port = await freePort();
      const id = `bench-${i}`;
      const proc = spawnTsx({
        name: `mock ${id}`,
        script: join(o.repoRoot, 'test/mock-replica/cli.ts'),
        args: ['--host', '127.0.0.1', '--port', String(port), '--model', o.model, '--profile', o.profile,
          '--time-scale', String(o.timeScale), '--seed', String(i), ...(o.extraArgs ?? [])],
        cwd: o.repoRoot,
        logPath: join(o.logDir, `mock-${id}.log`),
        cpus: o.cpus,
      });
      replicas.push({ id, hostPort: `127.0.0.1:${port}`, url: `http://127.0.0.1:${port}`, proc });
    }
    await Promise.all(replicas.map((r) => waitForHttp(r.proc, `${r.url}/health`, o.readyTimeoutMs ?? 30_000)));
  } catch (err) {
    await stop();
    throw err;
  }
  return { replicas, pids: replicas.map((r) => r.proc.pid), stop };
}
