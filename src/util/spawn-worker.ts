// Starts a worker thread whose entry is a TypeScript file. Under Node 20 the ESM loader hooks that
// `node --import tsx` registers do not reach worker threads, so a .ts entry is started through a one-line
// eval script that registers tsx's ESM hooks inside the worker and then imports the real file. A .js entry
// (a compiled build) starts directly. Thread: any. Setup only (costs one extra module load per worker).
import { Worker, type WorkerOptions } from 'node:worker_threads';

/**
 * The URL of the module `relPath` (written without its extension) next to the caller's `base`
 * (import.meta.url), with the caller's own extension: .ts when the gateway runs from its sources under tsx,
 * .js in a compiled build (npm test runs one, scripts/test-build.ts), which then starts its workers without
 * tsx's loader: ~0.3-0.5 s less CPU per worker start.
 */
export function siblingModule(relPath: string, base: string): URL {
  return new URL(`${relPath}${base.endsWith('.js') ? '.js' : '.ts'}`, base);
}

const TSX_API = import.meta.resolve('tsx/esm/api');

/**
 * V8 heap-sizing and perf-map flags apply to the whole process (workers get resourceLimits instead) and make
 * `new Worker` throw ERR_WORKER_INVALID_EXEC_ARGV when inherited, so they are left out of a worker's execArgv.
 * `node --max-semi-space-size=32 src/main.ts` (fewer scavenges on the acceptor) must not stop the gateway.
 */
const PROCESS_ONLY_FLAG = /^--(max-semi-space-size|max-old-space-size|min-semi-space-size|semi-space-growth-factor|trace-gc|perf-basic-prof|perf-basic-prof-only-functions|perf-prof|perf-prof-unwinding-info)(=|$)/;

/**
 * Young-generation bounds (resourceLimits.maxYoungGenerationSizeMb) for the helper threads: the replica poller
 * and the tokenizer workers. V8 splits the bound into two semispaces and a new-large-object space, a third
 * each, and otherwise grows every isolate's semispaces up to 16 MB as scavenges see survivors, and shrinks
 * them when allocation slows. Unbounded, that adaptive sizing makes RSS creep after warm-up under steady load:
 * in the soak a tokenizer worker's new space goes 16 → 32 MB at minute six and the poller's swings between 8
 * and 16 MB (native-bench/README.md, "soak"). Bounding them makes the process's memory a setup decision.
 * The cost is more frequent scavenges of the same survivors. The poller's 2 MB semispaces hold several scrapes
 * of a 38 KB page each; the tokenizer's 8 MB are what V8 gives it for the soak's first six minutes (at 4 MB the
 * seed request's tokenize CPU rose 5-10 % in `npm run bench -- tokenize --only seed` under
 * `--max-semi-space-size=4`).
 * Acceptors keep V8's default: their scavenge rate is on the request path, and `--max-semi-space-size`
 * decides the main thread's.
 */
export const POLLER_YOUNG_GENERATION_MB = 6;
export const TOKENIZER_YOUNG_GENERATION_MB = 24;

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
