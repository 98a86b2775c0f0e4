// Starts one mock replica as a child process (`node --import tsx test/mock-replica/cli.ts ...args`) and waits
// for the line with its URL. Used by fleet.ts and test/helpers/mock-replicas.ts. Thread: main (parent
// process). Setup only. The child watches its stdin pipe and exits when the parent dies, so no orphans.
import { spawn } from 'node:child_process';
import { nodeEntry } from '../helpers/node-entry.ts';

const CLI = nodeEntry('./cli', import.meta.url);
const START_TIMEOUT_MS = 60_000;

export interface SpawnedReplica {
  url: string;
  port: number;
  pid: number;
  /** Resolves when the process has exited (for any reason). */
  exited: Promise<void>;
  /** Sends `signal` (default SIGTERM) and resolves when the process has exited. */
  kill(signal?: NodeJS.Signals): Promise<void>;
}

export interface SpawnOptions {
  /** Called with each chunk the child writes to stderr (default: dropped after start). */
  onStderr?: (text: string) => void;
}

/** Port 0 unless `args` name one; rejects with the child's stderr if it exits or stays silent for 60 s. */
export function spawnMockReplica(args: string[], opts: SpawnOptions = {}): Promise<SpawnedReplica> {
  const argv = args.includes('--port') ? args : [...args, '--port', '0'];
  const child = spawn(process.execPath, [...CLI, ...argv], {
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...process.env, MOCK_REPLICA_EXIT_WITH_PARENT: '1' },
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    let started = false;
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`mock replica did not start within ${START_TIMEOUT_MS} ms: ${err}`));
    }, START_TIMEOUT_MS);
    child.stderr.on('data', (c: Buffer) => {
      if (!started) err += c.toString();
      else opts.onStderr?.(c.toString());
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      if (!started) reject(new Error(`mock replica exited (${code ?? signal}) before listening: ${err.trim().slice(-2000)}`));
    });
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString();
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (!m || started) return;
      started = true;
      clearTimeout(timer);
      const url = m[1]!;
      resolve({
        url,
        port: Number(new URL(url).port),
        pid: child.pid!,
        exited,
        kill: async (signal: NodeJS.Signals = 'SIGTERM') => {
          if (child.exitCode === null && child.signalCode === null) child.kill(signal);
          await exited;
        },
      });
    });
  });
}
