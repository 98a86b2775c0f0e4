// Starts a worker thread whose entry is a TypeScript file. Under Node 20 the ESM loader hooks that
// `node --import tsx` registers do not reach worker threads, so a .ts entry is started through a one-line
// eval script that registers tsx's ESM hooks inside the worker and then imports the real file. A .js entry
// (a compiled build) starts directly. Thread: any. Setup only (costs one extra module load per worker).
import { Worker, type WorkerOptions } from 'node:worker_threads';

const TSX_API = import.meta.resolve('tsx/esm/api');

export function spawnWorker(entry: URL, options: WorkerOptions = {}): Worker {
  if (!entry.pathname.endsWith('.ts')) return new Worker(entry, options);
  const code = `import(${JSON.stringify(TSX_API)}).then((m) => { m.register(); return import(${JSON.stringify(entry.href)}); })` +
    `.catch((err) => { setImmediate(() => { throw err; }); });`;
  return new Worker(code, { ...options, eval: true });
}
