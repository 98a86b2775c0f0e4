// Syscalls scenario (issue 3): how many system calls does each proxy make per request, by kind? Counted, not
// timed: `perf stat` on the kernel's syscall tracepoints of the proxy's process tree while the load generator
// runs, divided by the requests completed. Counts do not move with a noisy neighbour the way CPU time does,
// and they name mechanisms: this scenario is how one send() per SSE event (302 per 300-token stream, against
// nginx's ≈ 63 writev, one per read) was found and fixed by corking once per upstream read.
// Targets: gateway, floor-raw (uWS + src/upstream, no gateway logic), nginx (1 worker; its worker process is
// counted, not the master). Needs Debian's linux-perf (`perf`) and permission to trace (root here).
// Thread: bench main thread. Run: `npm run bench -- syscalls [--modes stream,json] [--max-tokens 300]`.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { BenchScenario } from '../types.ts';
import { chatBody } from '../load/openai-bodies.ts';
import { runLoad } from '../load/load-generator.ts';
import { startMockFleet } from '../harness/mock-fleet.ts';
import { startGatewayProcess } from '../harness/gateway-process.ts';
import { startFloorRelay } from '../harness/floor-process.ts';
import { startNginx } from '../nginx/nginx-proxy.ts';
import { assertPerf, countDuring } from '../harness/perf-stat.ts';

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
const MODEL = 'bench-model';
const API_KEY = 'sk-bench-syscalls';
/** The calls a proxy makes per request; everything else is folded into `all`. */
const KINDS = ['read', 'recvfrom', 'write', 'writev', 'sendto', 'epoll_wait', 'epoll_pwait', 'futex'] as const;

const syscalls: BenchScenario = async (args) => {
  const { values } = parseArgs({
    args,
    options: {
      requests: { type: 'string', default: '3000' },
      concurrency: { type: 'string', default: '32' },
      'max-tokens': { type: 'string', default: '16' },
      modes: { type: 'string', default: 'stream,json' },
      targets: { type: 'string', default: 'direct,gateway,floor-raw,nginx' },
    },
  });
  assertPerf();
  const wanted = values.targets.split(',');
  const maxTokens = Number(values['max-tokens']);
  const requests = Number(values.requests);
  const concurrency = Number(values.concurrency);
  const logDir = mkdtempSync(join(tmpdir(), 'expediter-syscalls-'));
  const stops: Array<() => Promise<void>> = [];
  const rows: Array<Array<string | number>> = [];
  const events = ['raw_syscalls:sys_enter', ...KINDS.map((k) => `syscalls:sys_enter_${k}`), 'context-switches'];
  try {
    const fleet = await startMockFleet({
      repoRoot, logDir, count: 2, model: MODEL, profile: 'tiny', timeScale: 0.01,
      extraArgs: ['--max-num-seqs', '256', '--num-gpu-blocks', '8192'],
    });
    stops.push(fleet.stop);
    const targets: Array<{ name: string; urls: string[]; pids: () => number[] }> = [];
    // direct: the client round-robins over the mocks; only the mocks are counted (the baseline of their cost).
    if (wanted.includes('direct')) targets.push({ name: 'direct', urls: fleet.replicas.map((r) => r.url), pids: () => [] });
    if (wanted.includes('gateway')) {
      const gw = await startGatewayProcess({ repoRoot, logDir, model: MODEL, apiKey: API_KEY, replicas: fleet.replicas });
      stops.push(gw.stop);
      targets.push({ name: 'gateway', urls: [gw.url], pids: () => [gw.proc.pid] });
    }
    if (wanted.includes('floor-raw')) {
      const fl = await startFloorRelay({ repoRoot, logDir, upstreams: fleet.replicas.map((r) => r.url), client: 'raw', server: 'uws' });
      stops.push(fl.stop);
      targets.push({ name: 'floor-raw', urls: [fl.url], pids: () => [fl.proc.pid] });
    }
    if (wanted.includes('nginx')) {
      const ng = await startNginx({ upstreams: fleet.replicas.map((r) => r.hostPort), workerProcesses: 1 });
      stops.push(ng.stop);
      // The worker handles every connection; the master only supervises.
      targets.push({ name: 'nginx', urls: [ng.url], pids: () => execFileSync('pgrep', ['-P', String(ng.proc.pid)], { encoding: 'utf8' }).trim().split('\n').map(Number) });
    }
    for (const mode of values.modes.split(',')) {
      const stream = mode === 'stream';
      const body = chatBody({ model: MODEL, maxTokens, stream });
      for (const t of targets) {
        const spec = {
          origins: t.urls, path: '/v1/chat/completions', body, headers: { authorization: `Bearer ${API_KEY}` },
          stream, concurrency, maxDurationMs: 60_000,
        };
        await runLoad({ ...spec, requests: Math.max(1000, Math.ceil(requests / 3)) }); // warm-up, not counted
        let completed = 0;
        let rps = 0;
        const proxyPids = t.pids();
        const counted = await countDuring([proxyPids, fleet.pids], events, async () => {
          const r = await runLoad({ ...spec, requests, warmupRequests: 0 });
          if (r.errors > 0) throw new Error(`${t.name} ${mode}: ${r.errors} errors (${r.firstError})`);
          completed = r.completed;
          rps = r.requestsPerSecond;
        });
        const mine = proxyPids.length > 0 ? [[t.name, counted[0]], [`mocks behind ${t.name}`, counted[1]]] as const
          : [[`mocks, ${t.name}`, counted[1]]] as const;
        for (const [who, c] of mine) {
          const per = (event: string): string => ((c?.get(event) ?? 0) / completed).toFixed(2);
          rows.push([mode, who, rps.toFixed(0), per('raw_syscalls:sys_enter'), ...KINDS.map((k) => per(`syscalls:sys_enter_${k}`)), per('context-switches')]);
        }
      }
    }
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
    rmSync(logDir, { recursive: true, force: true });
  }
  return {
    title: 'Syscalls per request, by kind: gateway vs floor-raw vs nginx',
    columns: ['mode', 'target', 'req/s', 'all', ...KINDS, 'context switches'],
    rows,
    notes: [
      `${requests} requests per target and mode after a ${Math.max(1000, Math.ceil(requests / 3))}-request warm-up, concurrency ${concurrency}, ${maxTokens} output tokens (${maxTokens + 3} SSE events when streaming), 2 tiny mocks`,
      'counts from perf stat on the syscall tracepoints of the proxy (every thread; nginx: its worker), divided by requests completed; nginx reads with recvfrom/readv and writes with writev, Node with read/write upstream and uWS with recvfrom/sendto toward clients',
      'fewer reads than events means a read carried several events; sends per read is what corking decides',
    ],
  };
};

export default syscalls;
