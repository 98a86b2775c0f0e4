// registry scenario (issue 5): (1) what does reading all 64 replica rows for one routing decision cost, and
// (2) how much CPU does the poller thread burn scraping 64 replicas 10 times a second?
// (1) In-process, alternating rounds: a decision = read all 64 rows. Variants: full seqlocked copy
// (ReplicaTable.read), the router's hot checks (assignId + state + data-plane word + one Float64), and the
// baseline: the same fields from 64 plain JS objects (what the router would cost with no shared memory).
// Reports ns per decision (wall) and CPU ns per decision, and the ratio to the baseline.
// (2) 64 node:http servers serving the realistic V1 page (test/fixtures/vllm-metrics/v1-0.12-lora.txt, 28 KB)
// run in a child process (their CPU is not counted). The real ReplicaPoller runs on this process's main
// thread, whose own CPU is read from /proc/thread-self/stat: first idle (no replicas: the noise floor), then
// with 64 replicas at --interval-ms, alternating, --rounds times. Also reports the parser's cost per page, so
// the share of the poller's CPU spent parsing versus in HTTP is visible.
// Thread: bench main thread; the servers are a child process (this same file with --child servers).
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import type { BenchScenario } from '../types.ts';
import { ReplicaPoller } from '../../src/registry/poll/poller.ts';
import { ParsedMetrics, parseVllmMetrics } from '../../src/registry/poll/vllm-metrics-parser.ts';
import { ReplicaRow, ReplicaTable, ReplicaTableWriter } from '../../src/registry/replica-table.ts';
import { ROW_STATE, ROW_STRIDE_BYTES } from '../../src/registry/replica-table-layout.ts';
import { VllmPageServer } from '../../test/integration/registry/vllm-page-server.ts';

const REPLICAS = 64;
const PAGE = readFileSync(new URL('../../test/fixtures/vllm-metrics/v1-0.12-lora.txt', import.meta.url), 'utf8');
const THIS_FILE = fileURLToPath(import.meta.url);

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

/** utime + stime of the calling OS thread, in microseconds (Linux /proc/thread-self/stat, 10 ms ticks). */
function threadCpuMicros(): number {
  const stat = readFileSync('/proc/thread-self/stat', 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) * 10_000; // fields 14 and 15 of stat; CLK_TCK = 100 on Linux
}

// ---- (1) read cost ---------------------------------------------------------------------------------------

interface PlainRow { assignId: number; state: number; dataPlaneFailures: number; kvUsage: number; waiting: number }

function readCost(decisions: number, rounds: number): { rows: Array<Array<string | number>>; extra: Record<string, number> } {
  const writer = new ReplicaTableWriter(REPLICAS);
  const table = new ReplicaTable(writer.buffer);
  const row = new ReplicaRow();
  const plain: PlainRow[] = [];
  const assignIds = new Int32Array(REPLICAS);
  for (let s = 0; s < REPLICAS; s++) {
    row.assignId = s + 1;
    row.state = ROW_STATE.UP;
    row.kvUsage = s / 100;
    row.waiting = s % 3;
    row.running = s;
    writer.write(s, row);
    assignIds[s] = s + 1;
    plain.push({ assignId: s + 1, state: ROW_STATE.UP, dataPlaneFailures: 0, kvUsage: s / 100, waiting: s % 3 });
  }
  let sink = 0;
  const variants: Array<[string, () => void]> = [
    ['plain objects (baseline)', () => {
      for (let s = 0; s < REPLICAS; s++) {
        const p = plain[s]!;
        if (p.assignId === assignIds[s] && p.state === ROW_STATE.UP && p.dataPlaneFailures < 2) sink += p.kvUsage + p.waiting;
      }
    }],
    ['isHealthy-style checks: 3 Int32 + 1 Float64 plain loads', () => {
      for (let s = 0; s < REPLICAS; s++) {
        if (table.assignId(s) === assignIds[s] && table.state(s) === ROW_STATE.UP && table.dataPlaneFailures(s) < 2) sink += table.lastGoodScrapeMs(s);
      }
    }],
    ['full seqlocked row copy (ReplicaTable.read)', () => {
      for (let s = 0; s < REPLICAS; s++) if (table.read(s, row)) sink += row.kvUsage + row.waiting;
    }],
  ];
  const wallNs: number[][] = variants.map(() => []);
  const cpuNs: number[][] = variants.map(() => []);
  for (const [, fn] of variants) for (let i = 0; i < 20_000; i++) fn(); // warm up (JIT)
  for (let r = 0; r < rounds; r++) {
    const order = r % 2 === 0 ? variants.map((_, i) => i) : variants.map((_, i) => variants.length - 1 - i);
    for (const i of order) {
      const fn = variants[i]![1];
      const cpu0 = process.cpuUsage();
      const t0 = process.hrtime.bigint();
      for (let d = 0; d < decisions; d++) fn();
      const wall = Number(process.hrtime.bigint() - t0);
      const cpu = process.cpuUsage(cpu0);
      wallNs[i]!.push(wall / decisions);
      cpuNs[i]!.push(((cpu.user + cpu.system) * 1000) / decisions);
    }
  }
  if (sink === 42) console.error('');
  const base = median(wallNs[0]!);
  const rows = variants.map(([name], i) => {
    const w = median(wallNs[i]!);
    return [`read 64 rows: ${name}`, w.toFixed(0), median(cpuNs[i]!).toFixed(0), (w / REPLICAS).toFixed(1), (w / base).toFixed(2)];
  });
  return { rows, extra: { readDecisionNsBaseline: base, readDecisionNsHot: median(wallNs[1]!), readDecisionNsFullCopy: median(wallNs[2]!) } };
}

// ---- (2) poller CPU --------------------------------------------------------------------------------------

async function startServersChild(): Promise<{ child: ChildProcess; ports: number[] }> {
  const child = spawn(process.execPath, ['--import', 'tsx', THIS_FILE, '--child', 'servers', '--count', String(REPLICAS)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const ports = await new Promise<number[]>((resolve, reject) => {
    let buf = '';
    child.stdout!.setEncoding('utf8');
    child.stdout!.on('data', (chunk: string) => {
      buf += chunk;
      const nl = buf.indexOf('\n');
      if (nl >= 0) resolve(JSON.parse(buf.slice(0, nl)) as number[]);
    });
    child.once('exit', (code) => reject(new Error(`servers child exited with ${code}`)));
  });
  return { child, ports };
}

async function pollerCpu(ports: number[], intervalMs: number, seconds: number, rounds: number, healthEvery: number): Promise<{
  idlePct: number; activePct: number; scrapesPerSecond: number; cpuMicrosPerScrape: number;
}> {
  const table = new SharedArrayBuffer(REPLICAS * ROW_STRIDE_BYTES);
  const settings = { scrapeIntervalMs: intervalMs, scrapeTimeoutMs: 1000, downAfterFailures: 2, healthEveryScrapes: healthEvery };
  const idle: number[] = [];
  const active: number[] = [];
  const perScrape: number[] = [];
  const rates: number[] = [];
  const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
  for (let r = 0; r < rounds; r++) {
    for (const mode of r % 2 === 0 ? ['idle', 'active'] : ['active', 'idle']) {
      const poller = new ReplicaPoller(table, settings, () => {});
      if (mode === 'active') ports.forEach((port, slot) => poller.handle({ type: 'assign', slot, assignId: r * 1000 + slot + 1, replicaId: `r${slot}`, url: `http://127.0.0.1:${port}`, poolBlockSize: 16 }));
      poller.start();
      await sleep(1000); // warm-up: connections opened, JIT settled
      const scrapes0 = poller.scrapesCompleted;
      const cpu0 = threadCpuMicros();
      const t0 = performance.now();
      await sleep(seconds * 1000);
      const cpu = threadCpuMicros() - cpu0;
      const wallMs = performance.now() - t0;
      const scrapes = poller.scrapesCompleted - scrapes0;
      poller.stop();
      const pct = (cpu / (wallMs * 1000)) * 100;
      if (mode === 'idle') idle.push(pct);
      else {
        active.push(pct);
        rates.push(scrapes / (wallMs / 1000));
        perScrape.push(cpu / Math.max(1, scrapes));
      }
    }
  }
  return { idlePct: median(idle), activePct: median(active), scrapesPerSecond: median(rates), cpuMicrosPerScrape: median(perScrape) };
}

function parseCost(pages: number): number {
  const m = new ParsedMetrics();
  for (let i = 0; i < 2000; i++) parseVllmMetrics(PAGE, m);
  const cpu0 = process.cpuUsage();
  for (let i = 0; i < pages; i++) parseVllmMetrics(PAGE, m);
  const cpu = process.cpuUsage(cpu0);
  return (cpu.user + cpu.system) / pages;
}

const registry: BenchScenario = async (args) => {
  const { values } = parseArgs({
    args,
    options: {
      decisions: { type: 'string', default: '200000' },
      rounds: { type: 'string', default: '4' },
      'interval-ms': { type: 'string', default: '100' },
      seconds: { type: 'string', default: '5' },
      'poller-rounds': { type: 'string', default: '2' },
      'reads-only': { type: 'boolean', default: false },
      'health-every': { type: 'string', default: '1' },
    },
  });
  const read = readCost(Number(values.decisions), Number(values.rounds));
  const parseMicros = parseCost(3000);
  if (values['reads-only']) {
    return { title: 'Replica registry: cost of reading 64 rows per routing decision', columns: ['measurement', 'wall ns / decision', 'CPU ns / decision', 'ns / row', 'ratio to baseline'], rows: read.rows, extra: read.extra };
  }
  const { child, ports } = await startServersChild();
  let poll;
  try {
    poll = await pollerCpu(ports, Number(values['interval-ms']), Number(values.seconds), Number(values['poller-rounds']), Number(values['health-every']));
  } finally {
    child.kill('SIGTERM');
  }
  const intervalMs = Number(values['interval-ms']);
  const targetRate = (REPLICAS * 1000) / intervalMs;
  return {
    title: 'Replica registry: cost of reading 64 rows per routing decision, and poller CPU at 64 replicas',
    columns: ['measurement', 'wall ns / decision', 'CPU ns / decision', 'ns / row', 'ratio to baseline'],
    rows: [
      ...read.rows,
      [`parse one 28 KB V1 /metrics page (CPU µs)`, parseMicros.toFixed(1), '', '', ''],
      [`poller thread CPU %, idle (noise floor)`, poll.idlePct.toFixed(2), '', '', ''],
      [`poller thread CPU %, ${REPLICAS} replicas every ${intervalMs} ms (${poll.scrapesPerSecond.toFixed(0)} scrapes/s of ${targetRate})`,
        poll.activePct.toFixed(2), '', '', ''],
      [`poller CPU µs per scrape (/metrics${values['health-every'] === '1' ? ' + /health' : `, /health every ${values['health-every']}th`})`, poll.cpuMicrosPerScrape.toFixed(0), '', '', ''],
      [`of which parsing (CPU µs; last column = share)`, parseMicros.toFixed(1), '', '', (parseMicros / poll.cpuMicrosPerScrape).toFixed(2)],
    ],
    notes: [
      'Rows 1-3: medians over alternating rounds; ratio = wall time / the plain-object baseline.',
      'Poller rows: the ReplicaPoller on this process\'s main thread, CPU from /proc/thread-self/stat (10 ms ticks); ' +
      'the 64 servers run in a child process and are not counted. In the gateway the same code runs on its own worker thread.',
      'Machine shared with other engineers: CPU % figures include scheduler noise; compare with the idle row.',
    ],
    extra: { ...read.extra, parseMicrosPerPage: parseMicros, ...poll },
  };
};
export default registry;

// ---- child: the 64 servers -------------------------------------------------------------------------------
if (process.argv[1] !== undefined && pathToFileURL(process.argv[1]).href === import.meta.url) {
  const { values } = parseArgs({ options: { child: { type: 'string' }, count: { type: 'string', default: '64' } }, strict: false });
  if (values.child === 'servers') {
    const servers: VllmPageServer[] = [];
    for (let i = 0; i < Number(values.count); i++) servers.push(await VllmPageServer.start());
    process.stdout.write(`${JSON.stringify(servers.map((s) => s.port))}\n`);
    process.on('SIGTERM', () => process.exit(0));
  }
}
