// Starts a worker thread whose entry is a TypeScript file. Under Node 20 the ESM loader hooks that
// `node --import tsx` registers do not reach worker threads, so a .ts entry is started through a one-line
// eval script that registers tsx's ESM hooks inside the worker and then imports the real file. A .js entry
// (a compiled build) starts directly. Thread: any. Setup only (costs one extra module load per worker).
import { Worker, type WorkerOptions } from 'node:worker_threads';

const TSX_API = import.meta.resolve('tsx/esm/api');

/**
 * V8 heap-sizing and perf-map flags apply to the whole process (workers get resourceLimits instead) and make
 * `new Worker` throw ERR_WORKER_INVALID_EXEC_ARGV when inherited, so they are left out of a worker's execArgv.
 * `node --max-semi-space-size=32 src/main.ts` (fewer scavenges on the acceptor) must not stop the gateway.
 */
const PROCESS_ONLY_FLAG = /^--(max-semi-space-size|max-old-space-size|min-semi-space-size|semi-space-growth-factor|trace-gc|perf-basic-prof|perf-basic-prof-only-functions|perf-prof|perf-prof-unwinding-info)(=|$)/;

export function workerExecArgv(args: readonly string[] = process.execArgv): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i] as string;
    if (PROCESS_ONLY_FLAG.test(a)) {
      if (!a.includes('=') && /^\d/.test(args[i + 1] ?? '')) i++;
      continue;
    }
    out.push(a);
  }
  return out;
}

export function spawnWorker(entry: URL, options: WorkerOptions = {}): Worker {
  const opts: WorkerOptions = { execArgv: workerExecArgv(), ...options };
  if (!entry.pathname.endsWith('.ts')) return new Worker(entry, opts);
  const code = `import(${JSON.stringify(TSX_API)}).then((m) => { m.register(); return import(${JSON.stringify(entry.href)}); })` +
    `.catch((err) => { setImmediate(() => { throw err; }); });`;
  return new Worker(code, { ...opts, eval: true });
}
