// `npm test`: finds or starts the services the suite needs (scripts/test-services.ts), runs the static checks
// while the Redis Cluster forms and then beside the unit and integration files (node's test runner), and stops
// what it started. The SERIAL integration files run first, one at a time, with BESIDE_SERIAL next to them and the
// BESIDE_SERIAL_NICED unit files at low priority; then every other file in parallel (test/README.md says why each
// is where it is).
//   node --import tsx scripts/test.ts                 everything (what `npm test` runs)
//   node --import tsx scripts/test.ts PATH...         only the test files at these paths (files or folders; no
//                                                     static checks), with the same services
// The test files run from a compiled mirror of the repository (scripts/test-build.ts: tsx's loader in every
// test process and worker costs more CPU than the suite can spare); TEST_FROM_SOURCES=1 runs them under tsx.
// Environment: REDIS_URL and REDIS_CLUSTER_PORTS are honoured when something answers there; TEST_CONCURRENCY
// sets the parallel width (default 4); CI=true makes missing prerequisites fail rather than skip.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureCluster, ensureRedis, type Service } from './test-services.ts';
import { buildTestTree, type TestTree } from './test-build.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/**
 * Integration files that need the machine to themselves: they load both cores on purpose (overload,
 * backpressure, sharded acceptors, the simulator's fidelity run), kill or fail over the shared cluster, or
 * count on a socket or timer firing within a window that a neighbour's load could stretch. Run one at a time
 * before the parallel group. test/README.md gives the reason for each.
 */
export const SERIAL = new Set([
  'test/integration/admission/overload-70b.test.ts',
  'test/integration/faults/idle-connections.test.ts',
  'test/integration/faults/kill-and-redis.test.ts',
  'test/integration/faults/reload-invalid.test.ts',
  'test/integration/faults/replica-faults.test.ts',
  'test/integration/faults/replica-stall.test.ts',
  'test/integration/gateway/backpressure.test.ts',
  'test/integration/gateway/backpressure-large-reads.test.ts',
  'test/integration/gateway/uws-sink-drain.test.ts',
  'test/integration/gateway/uws-sink-overflow.test.ts',
  'test/integration/gateway/uws-sink-hysteresis.test.ts',
  'test/integration/sim/fidelity.test.ts',
  'test/integration/threads/sharded.test.ts',
  'test/integration/threads/sigterm-drain.test.ts',
  'test/integration/upstream/h1-client-edges.test.ts',
  'test/integration/upstream/h1-write-burst.test.ts',
]);

/**
 * Out of the pool only because it fails over and kills masters of the Redis Cluster that the pool's quota
 * tests share; it needs no quiet machine (a tenth of a core, 20 s of waiting for failovers), so it runs beside
 * the serial group rather than after it. Nothing else uses the cluster, so the pool after it finds it settled.
 */
export const BESIDE_SERIAL = new Set([
  'test/integration/quota/redis-cluster.test.ts',
]);

/**
 * Unit files that are CPU and nothing else (tokenizers checked against their references, simulator runs in
 * virtual time: no socket, no timer, no wall-clock window) and long (4-30 s of CPU each, ~75 s together). They
 * run beside the serial group at the static checks' low priority, two at a time, taking the core it leaves idle
 * rather than a share of the pool's two busy ones; the pool starts when both are done. A file with a real-time
 * assertion must not go here: at low priority next to a serial file that loads both cores, it waits
 * (test/unit/structure/source-layout.test.ts fails on a clock, timer or socket in one).
 */
export const BESIDE_SERIAL_NICED = new Set([
  'test/unit/tokenize/model-tokenizers.test.ts',
  'test/unit/sim/kv-events.test.ts',
  'test/unit/tokenize/jinja-template.test.ts',
  'test/unit/tokenize/goldens.test.ts',
  'test/unit/sim/sweep.test.ts',
  'test/unit/tokenize/model-prompt-cache.test.ts',
  'test/unit/load/seed-mix-requests.test.ts',
  'test/integration/sim/run-twins.test.ts',
]);

/**
 * The pool's longest files (15-70 s each from start to end on two busy cores: real model vocabularies in
 * several threads and child processes, child gateways, slow clients), started before the rest so that the
 * pool does not end on one of them running alone: the longest-first rule of scheduling on a few cores. A file
 * missing from this list only starts in its usual place.
 */
export const POOL_FIRST = [
  'test/integration/gateway/any-model-tokenizer.test.ts',
  'test/integration/gateway/cancel-while-tokenizing.test.ts',
  'test/integration/faults/slowloris.test.ts',
  'test/integration/gateway/front-door.test.ts',
  'test/integration/mock-replica/processes.test.ts',
];

const CONCURRENCY = Number(process.env.TEST_CONCURRENCY ?? 4);
const FROM_SOURCES = process.env.TEST_FROM_SOURCES === '1';

function testFiles(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(join(ROOT, dir))) {
    const rel = `${dir}/${name}`;
    if (statSync(join(ROOT, rel)).isDirectory()) out.push(...testFiles(rel));
    else if (name.endsWith('.test.ts')) out.push(rel);
  }
  return out.sort();
}

interface PhaseResult { name: string; ok: boolean; ms: number }

/** Phases running now, so that Ctrl-C or SIGTERM reaches them; set once a signal came, so none starts after. */
const running = new Set<ChildProcess>();
let interrupted: NodeJS.Signals | null = null;

/**
 * The static checks run at the lowest CPU priority (`nice -n 19`, set before exec so every thread has it): they
 * take what the test files leave idle, mostly the serial group's waits, instead of a share of the pool's two
 * busy cores. Where `nice` is missing (Windows) they run at normal priority.
 */
const NICE = process.platform !== 'win32';

function run(name: string, cmd: string, args: string[], env: Record<string, string>, lowPriority = false): Promise<PhaseResult> {
  const t0 = performance.now();
  if (interrupted !== null) return Promise.resolve({ name: `${name} (not run: ${interrupted})`, ok: false, ms: 0 });
  console.log(`\n== ${name}: ${[cmd, ...args].join(' ').slice(0, 200)}`);
  const [file, argv] = lowPriority && NICE ? ['nice', ['-n', '19', cmd, ...args]] : [cmd, args];
  return new Promise((resolve) => {
    const proc = spawn(file, argv, { cwd: ROOT, env: { ...process.env, ...env }, stdio: 'inherit' });
    running.add(proc);
    proc.once('error', (err) => {
      running.delete(proc);
      console.error(`${name}: ${String(err)}`);
      resolve({ name, ok: false, ms: performance.now() - t0 });
    });
    proc.once('close', (code) => {
      running.delete(proc);
      resolve({ name, ok: code === 0 && interrupted === null, ms: performance.now() - t0 });
    });
  });
}

const bin = (tool: string): string => join(ROOT, 'node_modules', '.bin', tool);
/**
 * A test, and a file as a whole, fails after this long: a handle a file leaves open (a socket a client never
 * closed) keeps its process alive after its last test, and the run would wait for it forever. The slowest file
 * takes ~80 s on a loaded machine.
 */
const FILE_TIMEOUT_MS = 240_000;
const TIMES_DIR = mkdtempSync(join(tmpdir(), 'expediter-test-times-'));
const REPORTER = join(ROOT, 'scripts', 'test-file-times.mjs');
/**
 * node --test on `files` (repository paths): from the compiled tree when there is one, else under tsx; the usual
 * report on stdout (spec on a terminal, else TAP), file times to `timesFile`.
 */
const nodeTest = (files: string[], concurrency: number, timesFile: string, tree: TestTree | null): string[] => [
  ...(tree === null ? ['--import', 'tsx'] : ['--enable-source-maps']),
  '--test', `--test-concurrency=${concurrency}`, `--test-timeout=${FILE_TIMEOUT_MS}`,
  `--test-reporter=${process.stdout.isTTY ? 'spec' : 'tap'}`, '--test-reporter-destination=stdout',
  `--test-reporter=${REPORTER}`, `--test-reporter-destination=${timesFile}`,
  ...(tree === null ? files : files.map((f) => join(tree.dir, f.replace(/\.ts$/, '.js')))),
];

/** A test file's repository path, from its path in the compiled tree or in the repository. */
const repoPath = (file: string, tree: TestTree | null): string =>
  tree !== null && file.startsWith(tree.dir) ? relative(tree.dir, file).replace(/\.js$/, '.ts') : relative(ROOT, file);

/** The slowest files of a phase, from the reporter's lines. */
function slowest(timesFile: string, n: number, tree: TestTree | null): string[] {
  let text = '';
  try {
    text = readFileSync(timesFile, 'utf8');
  } catch {
    return [];
  }
  const rows = text.split('\n').filter(Boolean).map((l) => JSON.parse(l) as { file: string; spanMs: number });
  return rows.sort((a, b) => b.spanMs - a.spanMs).slice(0, n)
    .map((r) => `${(r.spanMs / 1000).toFixed(1).padStart(6)} s  ${repoPath(r.file, tree)}`);
}

async function main(): Promise<number> {
  const only = process.argv.slice(2).map((f) => relative(ROOT, join(process.cwd(), f)))
    .flatMap((f) => statSync(join(ROOT, f)).isDirectory() ? testFiles(f) : [f]);
  const results: PhaseResult[] = [];
  const slow: string[] = [];
  const services: Service[] = [];
  let tree: TestTree | null = null;
  const stopAll = async (): Promise<void> => {
    for (const s of services.splice(0).reverse()) await s.stop().catch((err: unknown) => console.error(`stopping a service: ${String(err)}`));
  };
  // A signal stops the phase that runs (node's test runner ends its files) and starts no other; the finally
  // below then stops the services as on any other exit.
  const onSignal = (sig: NodeJS.Signals): void => {
    interrupted = sig;
    for (const proc of running) proc.kill(sig);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  try {
    // The cluster takes seconds to form (nodes meet, replicas sync): the static checks run meanwhile.
    const servicesReady = Promise.all([ensureRedis(), ensureCluster()]).then((s) => {
      services.push(...s);
      for (const x of s) console.log(`services: ${x.describe}`);
      return Object.assign({}, ...s.map((x) => x.env)) as Record<string, string>;
    }, async (err: unknown) => {
      // one of the two may have started: stop it before failing
      await stopAll();
      throw err;
    });
    servicesReady.catch(() => undefined);
    const treeReady = FROM_SOURCES ? Promise.resolve(null) : buildTestTree(ROOT).then((t) => {
      tree = t;
      console.log(`test build: ${t.files} TypeScript files compiled into ${t.dir}`);
      return t;
    });
    treeReady.catch(() => undefined);
    // The static checks start at once, at low priority (NICE): they use the cores while the cluster forms and
    // whatever the serial group (which runs first) leaves idle, and nothing waits for them before the end.
    const staticChecks = only.length > 0 ? Promise.resolve([]) : Promise.all([
      run('lint', bin('eslint'), ['.'], {}, true),
      run('typecheck', bin('tsc'), ['-p', 'tsconfig.json', '--noEmit'], {}, true)
        .then(async (r) => [r, await run('k6 typecheck', bin('tsc'), ['-p', 'k6/tsconfig.json', '--noEmit'], {}, true)]),
    ]).then(([lint, types]) => [lint, ...types]);
    const env = await servicesReady.catch(async (err: unknown) => {
      results.push(...await staticChecks);
      throw err;
    });
    const built = await treeReady.catch(async (err: unknown) => {
      results.push(...await staticChecks);
      throw err;
    });

    const allUnit = only.length > 0 ? only.filter((f) => f.startsWith('test/unit/')) : testFiles('test/unit');
    const unit = allUnit.filter((f) => !BESIDE_SERIAL_NICED.has(f));
    const niced = allUnit.filter((f) => BESIDE_SERIAL_NICED.has(f));
    const integration = only.length > 0 ? only.filter((f) => !f.startsWith('test/unit/')) : testFiles('test/integration');
    const parallel = integration.filter((f) => !SERIAL.has(f) && !BESIDE_SERIAL.has(f));
    const serial = integration.filter((f) => SERIAL.has(f));
    const beside = integration.filter((f) => BESIDE_SERIAL.has(f));
    // Unit files and the parallel integration files share one pool: no phase waits for another's slowest file.
    // The longest files start first (POOL_FIRST), then the integration files, which take longer than most unit
    // files, so the pool does not end on one of them alone.
    const rest = [...parallel, ...unit];
    const pooled = [...POOL_FIRST.filter((f) => rest.includes(f)), ...rest.filter((f) => !POOL_FIRST.includes(f))];
    const phase = async (name: string, files: string[], width: number, lowPriority = false): Promise<void> => {
      if (files.length === 0) return;
      const timesFile = join(TIMES_DIR, `${name.replace(/\W+/g, '-')}.jsonl`);
      results.push(await run(name, process.execPath, nodeTest(files, width, timesFile, built), env, lowPriority));
      slow.push(`${name}:`, ...slowest(timesFile, 12, built));
    };
    const staticDone = staticChecks.then((r) => {
      results.unshift(...r);
    });
    // The serial group first: its files leave more than a core idle (they wait on timeouts, drains and
    // failovers), which the static checks take at their low priority, so the checks are done before the pool
    // starts and the pool has both cores (~50 s shorter on two cores than the pool first, when they took the
    // pool's gaps and ended within the serial group).
    await Promise.all([
      phase(`serial integration (${serial.length} files, one at a time)`, serial, 1),
      phase(`beside the serial group (${beside.length} file${beside.length === 1 ? '' : 's'})`, beside, 1),
      phase(`unit files beside the serial group (${niced.length} files, 2 at once, low priority)`, niced, 2, true),
    ]);
    await phase(`unit + parallel integration (${pooled.length} files, ${CONCURRENCY} at once)`, pooled, CONCURRENCY);
    await staticDone;
  } catch (err) {
    console.error(`npm test: ${err instanceof Error ? err.message : String(err)}`);
    results.push({ name: 'services', ok: false, ms: 0 });
  } finally {
    await stopAll();
    (tree as TestTree | null)?.remove();
  }
  rmSync(TIMES_DIR, { recursive: true, force: true });
  if (slow.length > 0) console.log(`\n== slowest files (from start to end of each file)\n${slow.join('\n')}`);
  console.log('\n== summary');
  for (const r of results) console.log(`${r.ok ? 'ok  ' : 'FAIL'} ${r.name} (${(r.ms / 1000).toFixed(1)} s)`);
  if (interrupted !== null) return interrupted === 'SIGINT' ? 130 : 143;
  return results.every((r) => r.ok) ? 0 : 1;
}

process.exitCode = await main();
