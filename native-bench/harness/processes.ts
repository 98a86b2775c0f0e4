// Child processes for end-to-end benchmarks: free loopback ports, spawning a target (optionally pinned to CPUs
// with taskset), waiting until it answers HTTP, and stopping it by its own pid (SIGTERM, then SIGKILL).
// Thread: bench main thread. Not on a hot path. Each child's stdout/stderr go to a log file in the run's temp
// directory so a failed start can be diagnosed without interleaving with the results table.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { openSync, closeSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

export interface Proc {
  name: string;
  pid: number;
  logPath: string;
  child: ChildProcess;
  stop(): Promise<void>;
}

/** Children still running; a Ctrl-C or SIGTERM of the bench sends each of them SIGTERM before exiting. */
const live = new Set<ChildProcess>();
let signalsHooked = false;
function hookSignals(): void {
  if (signalsHooked) return;
  signalsHooked = true;
  const onSignal = (signal: NodeJS.Signals): void => {
    for (const child of live) child.kill('SIGTERM');
    process.exit(signal === 'SIGINT' ? 130 : 143);
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
}

/** A loopback port that was free a moment ago (bind 0, read, close); fine for a bench, racy in general. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr !== null ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

export interface SpawnOptions {
  name: string;
  command: string;
  args: readonly string[];
  cwd: string;
  logPath: string;
  env?: Readonly<Record<string, string>>;
  /** Inherited variables to remove (e.g. REDIS_URL, which would switch the gateway's quota store). */
  dropEnv?: readonly string[];
  /** `taskset -c <cpus>`: taskset execs the command, so the pid we hold is the target's own. */
  cpus?: string;
}

export function spawnLogged(o: SpawnOptions): Proc {
  const fd = openSync(o.logPath, 'a');
  const [command, args] = o.cpus ? ['taskset', ['-c', o.cpus, o.command, ...o.args]] : [o.command, [...o.args]];
  const env: Record<string, string | undefined> = { ...process.env, ...o.env };
  for (const k of o.dropEnv ?? []) delete env[k];
  const child = spawn(command, args, { cwd: o.cwd, env, stdio: ['ignore', fd, fd] });
  closeSync(fd);
  if (child.pid === undefined) throw new Error(`${o.name}: spawn ${command} failed`);
  hookSignals();
  live.add(child);
  child.once('exit', () => live.delete(child));
  let exited = child.exitCode !== null;
  const exitedPromise = new Promise<void>((resolve) => child.once('exit', () => { exited = true; resolve(); }));
  return {
    name: o.name,
    pid: child.pid,
    logPath: o.logPath,
    child,
    async stop() {
      if (exited) return;
      child.kill('SIGTERM');
      const killed = await Promise.race([exitedPromise.then(() => true), sleep(5000).then(() => false)]);
      if (!killed) {
        child.kill('SIGKILL');
        await exitedPromise;
      }
    },
  };
}

/** Spawns `node --import tsx <script> ...args` from the repo root: the node process is the direct child. */
export function spawnTsx(o: Omit<SpawnOptions, 'command' | 'args'> & { script: string; args: readonly string[] }): Proc {
  return spawnLogged({ ...o, command: process.execPath, args: ['--import', 'tsx', o.script, ...o.args] });
}

/** Polls `url` until it answers 200 (or `acceptAny` statuses), the process exits, or `timeoutMs` passes. */
export async function waitForHttp(proc: Proc, url: string, timeoutMs: number, acceptAny = false): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = 'no answer';
  while (Date.now() < deadline) {
    if (proc.child.exitCode !== null || proc.child.signalCode !== null) {
      throw new Error(`${proc.name} exited (${proc.child.exitCode ?? proc.child.signalCode}) before ${url} answered; log:\n${tailOf(proc.logPath)}`);
    }
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(1000) });
      await res.arrayBuffer();
      if (res.status === 200 || acceptAny) return;
      last = `status ${res.status}`;
    } catch (err) {
      last = (err as Error).message;
    }
    await sleep(100);
  }
  throw new Error(`${proc.name}: ${url} not ready after ${timeoutMs} ms (${last}); log:\n${tailOf(proc.logPath)}`);
}

export function tailOf(path: string, lines = 20): string {
  try {
    return readFileSync(path, 'utf8').split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}
