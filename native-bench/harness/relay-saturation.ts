// `npm run bench -- relay --saturate`: the proxies' own cost at the load the design runs them at, where the
// event loop rarely sleeps. A proxy measured at a few requests per second pays an epoll wake-up and a context
// switch per token; at saturation one wake-up serves many sockets. Each target (gateway, floor-raw, nginx with
// one worker and least_conn) carries the same closed-loop load; the concurrency is calibrated first so that
// the gateway's main thread is busy about `--busy` of the wall time (its CPU from /proc/PID/task/PID/stat).
// Two phases:
//   stream: mocks with the 8B profile at `--sat-time-scale` (a token every few ms per stream, every running
//     stream's token in the same engine step, as vLLM sends them), `--sat-tokens` tokens per stream: each token
//     reaches the proxy in its own read, as it does in production, where a stream's tokens are 10-50 ms apart;
//   json: tiny mocks at time scale 0.01, 16 tokens, non-streaming (the per-request path).
// Per target: the main thread's busy share, proxy CPU per request and per SSE event, and from `perf stat` on
// the syscall tracepoints the reads and sends per request: sends per read is what backpressure and corking
// decide. Rounds alternate the targets' order. Thread: bench main thread.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import type { BenchResult } from '../types.ts';
import { chatBody } from '../load/openai-bodies.ts';
import { runLoad, type LoadResult } from '../load/load-generator.ts';
import { cpuMicros } from '../load/proc-cpu.ts';
import { median } from '../load/percentiles.ts';
import { startMockFleet, type MockFleet } from './mock-fleet.ts';
import { startGatewayProcess } from './gateway-process.ts';
import { startFloorRelay } from './floor-process.ts';
import { startNginx } from '../nginx/nginx-proxy.ts';
import { assertPerf, countDuring } from './perf-stat.ts';
import { PERF_NODE_ARGS, perfTopFrames, startPerfRecord, type PerfFrame } from './perf-record.ts';
import { join } from 'node:path';
import { fmt } from './rounds.ts';

const MODEL = 'bench-model';
const API_KEY = 'sk-bench-relay';
const READS = ['read', 'readv', 'recvfrom', 'recvmsg'] as const;
const SENDS = ['write', 'writev', 'sendto', 'sendmsg'] as const;
const EVENTS = [...READS, ...SENDS].map((k) => `syscalls:sys_enter_${k}`);
/**
 * Targets no bench load can miss: the question is what relaying costs, and on a crowded machine the gateway's
 * admission would otherwise shed part of the load (429) on TTFTs the neighbours stretched.
 */
const LAX = { premium: 3_600_000, standard: 3_600_000, batch: 3_600_000 };
export const PERMISSIVE_ADMISSION = {
  admission: { ttft_ms_by_tier: LAX, end_to_end_ms_by_tier: LAX, tpot_target_ms: 3_600_000 },
  // Hundreds of connections opened in one turn to a mock starved of CPU: a 2 s connect timeout takes the
  // replica out of rotation and every request after is a 429.
  upstream: { connect_timeout_ms: 30_000 },
};

interface SatTarget {
  name: string;
  url: string;
  /** The process tree whose CPU is the proxy's. */
  pid: number;
  /** The thread that runs the event loop (the gateway's main thread, nginx's worker): its busy share. */
  loopPid: number;
  /** The processes whose syscalls are counted (nginx: its worker). */
  syscallPids: number[];
}

interface SatRun {
  phase: string;
  target: string;
  round: number;
  concurrency: number;
  load: LoadResult;
  busy: number;
  reads: number;
  sends: number;
  /** The proxy's CPU per request less what it spends idle over as long (idleMicrosPerSecond). */
  netMicrosPerRequest: number;
}

/** CPU per second a proxy spends with no request in flight (the gateway scrapes every replica 10 times a second). */
async function idleMicrosPerSecond(pid: number, ms = 3000): Promise<number> {
  const c0 = cpuMicros([pid]);
  const w0 = performance.now();
  await new Promise((r) => setTimeout(r, ms));
  return (cpuMicros([pid]) - c0) / ((performance.now() - w0) / 1000);
}

/** utime + stime of one thread, in clock ticks (100 per second on Linux). */
function threadTicks(pid: number, tid: number): number {
  const text = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'latin1');
  const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return Number(rest[11]) + Number(rest[12]);
}

async function measure(t: SatTarget, phase: string, round: number, spec: Parameters<typeof runLoad>[0], idle = 0): Promise<SatRun> {
  let load: LoadResult | null = null;
  let busy = 0;
  const [counts] = await countDuring([t.syscallPids], EVENTS, async () => {
    const t0 = threadTicks(t.loopPid, t.loopPid);
    const w0 = performance.now();
    load = await runLoad(spec);
    busy = ((threadTicks(t.loopPid, t.loopPid) - t0) * 10) / (performance.now() - w0);
  });
  const done = load as unknown as LoadResult;
  const per = (kinds: readonly string[]): number => kinds.reduce((n, k) => n + (counts!.get(`syscalls:sys_enter_${k}`) ?? 0), 0) / done.completed;
  const net = (done.cpuMicrosPerRequest.proxy ?? NaN) - (idle * done.elapsedMs) / 1000 / done.completed;
  return { phase, target: t.name, round, concurrency: spec.concurrency, load: done, busy, reads: per(READS), sends: per(SENDS), netMicrosPerRequest: net };
}

export async function relaySaturation(args: string[], repoRoot: string, logDir: string): Promise<BenchResult> {
  const { values } = parseArgs({
    args,
    options: {
      busy: { type: 'string', default: '0.7' },
      seconds: { type: 'string', default: '10' },
      rounds: { type: 'string', default: '2' },
      targets: { type: 'string', default: 'gateway,floor-raw,nginx' },
      modes: { type: 'string', default: 'stream,json' },
      replicas: { type: 'string', default: '2' },
      'sat-time-scale': { type: 'string', default: '0.2' },
      'sat-tokens': { type: 'string', default: '300' },
      /** Skip calibration: this concurrency per mode, e.g. `stream=400,json=64`. */
      concurrency: { type: 'string', default: '' },
      'max-concurrency': { type: 'string', default: '1500' },
      policy: { type: 'string', default: 'round-robin' },
      /** JSON merged over the generated gateway config, per top-level section. */
      'gateway-config': { type: 'string', default: '{}' },
      'gateway-node-args': { type: 'string', default: '' },
      'keep-logs': { type: 'boolean', default: false },
      /** After the rounds, one more gateway run under `perf record` (CPU-time samples, JIT frames named): its top frames per mode. */
      perf: { type: 'boolean', default: false },
    },
  });
  assertPerf();
  const busyGoal = Number(values.busy);
  const seconds = Number(values.seconds);
  const rounds = Number(values.rounds);
  const wanted = values.targets.split(',');
  const tokens = Number(values['sat-tokens']);
  const fixed = new Map(values.concurrency.split(',').filter((x) => x.includes('=')).map((x) => x.split('=') as [string, string]).map(([k, v]) => [k, Number(v)]));
  const loadBefore = loadavg();
  const runs: SatRun[] = [];
  const notes: string[] = [];
  const calibrations: string[] = [];
  const idleNotes: string[] = [];
  const profiles: Record<string, PerfFrame[]> = {};
  const stops: Array<() => Promise<void>> = [];
  try {
    for (const mode of values.modes.split(',')) {
      const stream = mode === 'stream';
      const fleet: MockFleet = await startMockFleet({
        repoRoot, logDir, count: Number(values.replicas), model: MODEL,
        profile: stream ? 'llama-8b-a100' : 'tiny', timeScale: stream ? Number(values['sat-time-scale']) : 0.01,
        extraArgs: ['--max-num-seqs', '1024', '--num-gpu-blocks', stream ? '60000' : '8192'],
      });
      const phaseStops: Array<() => Promise<void>> = [fleet.stop];
      stops.push(async () => { for (const s of phaseStops.reverse()) await s().catch(() => undefined); });
      const targets: SatTarget[] = [];
      if (wanted.includes('gateway')) {
        const gw = await startGatewayProcess({
          repoRoot, logDir, model: MODEL, apiKey: API_KEY, replicas: fleet.replicas, policy: values.policy,
          configOverrides: {
            ...PERMISSIVE_ADMISSION,
            // The pool's engine figures (KV blocks, step times) are the mocks' profile's: with tiny's 256 blocks
            // admission would hold back all but a few of the 8B mocks' streams.
            // Its TTFT and TPOT targets out of reach too, as the tenant tier's.
            pools: [{
              id: 'bench', model: MODEL, mock_profile: stream ? 'llama-8b-a100' : 'tiny', engine: { ttft_target_ms: 3_600_000, tpot_target_ms: 3_600_000 },
              replicas: fleet.replicas.map((r) => ({ id: r.id, url: r.url })),
            }],
            ...(JSON.parse(values['gateway-config']) as Record<string, unknown>),
          },
          nodeArgs: [...values['gateway-node-args'].split(' ').filter((a) => a.length > 0), ...(values.perf ? PERF_NODE_ARGS : [])],
        });
        phaseStops.push(gw.stop);
        targets.push({ name: 'gateway', url: gw.url, pid: gw.proc.pid, loopPid: gw.proc.pid, syscallPids: [gw.proc.pid] });
      }
      if (wanted.includes('floor-raw')) {
        const fl = await startFloorRelay({ repoRoot, logDir, upstreams: fleet.replicas.map((r) => r.url), client: 'raw', server: 'uws' });
        phaseStops.push(fl.stop);
        targets.push({ name: 'floor-raw', url: fl.url, pid: fl.proc.pid, loopPid: fl.proc.pid, syscallPids: [fl.proc.pid] });
      }
      if (wanted.includes('nginx')) {
        const ng = await startNginx({ upstreams: fleet.replicas.map((r) => r.hostPort), workerProcesses: 1, balance: 'least_conn' });
        phaseStops.push(ng.stop);
        const worker = Number(execFileSync('pgrep', ['-P', String(ng.proc.pid)], { encoding: 'utf8' }).trim().split('\n')[0]);
        targets.push({ name: 'nginx', url: ng.url, pid: ng.proc.pid, loopPid: worker, syscallPids: [worker] });
      }
      const gateway = targets[0];
      if (gateway === undefined) throw new Error('no targets');
      const body = chatBody({ model: MODEL, maxTokens: stream ? tokens : 16, stream });
      const spec = (t: SatTarget, concurrency: number, ms: number, warm: number): Parameters<typeof runLoad>[0] => ({
        origins: [t.url], path: '/v1/chat/completions', body, headers: { authorization: `Bearer ${API_KEY}` }, stream,
        concurrency, requests: 1e9, maxDurationMs: ms, warmupRequests: warm, requestTimeoutMs: 120_000,
        cpuPids: { proxy: [t.pid], mocks: fleet.pids },
      });
      // Warm every target (JIT, connections), then calibrate on the first (the gateway): busy share is close to
      // linear in concurrency below saturation, so two scaled steps land near the goal.
      for (const t of targets) await runLoad(spec(t, stream ? 64 : 32, 3000, stream ? 64 : 1000));
      let c = fixed.get(mode) ?? (stream ? 128 : 16);
      if (!fixed.has(mode)) {
        // At most doubling per step: on a crowded machine the mocks, not the gateway, may be the limit. A step
        // with errors (a mock or a proxy refusing) goes back to the last clean concurrency.
        let clean = c;
        for (let step = 0; step < 4; step++) {
          const r = await measure(gateway, mode, -1, spec(gateway, c, 4000, c));
          calibrations.push(`${mode}: c=${c} → ${gateway.name} loop ${fmt(100 * r.busy, 0)} % busy, ${fmt(r.load.requestsPerSecond, 0)} req/s, ${r.load.errors} errors`);
          console.error(`saturate ${calibrations.at(-1)}${r.load.firstError ? ` (${r.load.firstError})` : ''}`);
          if (r.load.errors > 0) {
            c = clean;
            break;
          }
          clean = c;
          const next = Math.min(Number(values['max-concurrency']), 2 * c, Math.max(4, Math.round(c * busyGoal / Math.max(r.busy, 0.01))));
          if (Math.abs(next - c) / c < 0.1) break;
          c = next;
        }
      }
      const idle = new Map<string, number>();
      for (const t of targets) idle.set(t.name, await idleMicrosPerSecond(t.pid));
      idleNotes.push(`${mode}: ${targets.map((t) => `${t.name} ${fmt((idle.get(t.name) ?? 0) / 1000, 1)}`).join(', ')} ms of CPU per second idle`);
      for (let round = 0; round < rounds; round++) {
        for (const t of round % 2 === 0 ? targets : [...targets].reverse()) {
          const r = await measure(t, mode, round, spec(t, c, seconds * 1000, c), idle.get(t.name));
          runs.push(r);
          console.error(`saturate ${mode} round ${round + 1}/${rounds} ${t.name} c=${c}: ${fmt(r.load.requestsPerSecond, 0)} req/s, loop ${fmt(100 * r.busy, 0)} % busy, `
            + `${fmt(r.load.cpuMicrosPerRequest.proxy ?? NaN, 0)} µs/req, ${fmt(r.reads, 1)} reads and ${fmt(r.sends, 1)} sends per req, errors ${r.load.errors}`
            + (r.load.firstError ? ` (${r.load.firstError})` : ''));
        }
      }
      if (values.perf && gateway.name === 'gateway') {
        const file = join(logDir, `perf-${mode}.data`);
        const rec = await startPerfRecord(gateway.pid, file);
        await runLoad(spec(gateway, c, seconds * 1000, 0));
        await rec.stop();
        profiles[mode] = perfTopFrames(file, gateway.pid, 25);
      }
      const stop = stops.pop()!;
      await stop();
    }
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
  }
  const loadAfter = loadavg();

  const names = [...new Set(runs.map((r) => r.target))];
  const med = (phase: string, target: string, f: (r: SatRun) => number): number => median(runs.filter((r) => r.phase === phase && r.target === target).map(f));
  const cpu = (r: SatRun): number => r.load.cpuMicrosPerRequest.proxy ?? NaN;
  const rows: Array<Array<string | number>> = [];
  for (const phase of [...new Set(runs.map((r) => r.phase))]) {
    const nginxRate = med(phase, 'nginx', (r) => r.load.requestsPerSecond);
    const nginxCpu = med(phase, 'nginx', cpu);
    for (const name of names) {
      const events = med(phase, name, (r) => r.load.framesPerRequest);
      const perReq = med(phase, name, cpu);
      const net = med(phase, name, (r) => r.netMicrosPerRequest);
      const perEvent = phase === 'stream' ? perReq / events : NaN;
      // The per-request part (a JSON request's cost) taken out: what each further token event costs.
      const jsonNet = med('json', name, (r) => r.netMicrosPerRequest);
      const marginal = phase === 'stream' && Number.isFinite(jsonNet) ? (net - jsonNet) / events : NaN;
      const reads = med(phase, name, (r) => r.reads);
      const sends = med(phase, name, (r) => r.sends);
      rows.push([
        phase, name, med(phase, name, (r) => r.concurrency), fmt(med(phase, name, (r) => r.load.requestsPerSecond), 0),
        fmt(med(phase, name, (r) => r.load.requestsPerSecond) / nginxRate), fmt(100 * med(phase, name, (r) => r.busy), 0),
        fmt(perReq, 0), fmt(net, 0), fmt(perReq / nginxCpu), phase === 'stream' ? fmt(events, 0) : '-', fmt(perEvent, 1), fmt(marginal, 1),
        fmt(reads, 1), fmt(sends, 1), phase === 'stream' ? fmt(sends / reads) : '-',
        fmt(med(phase, name, (r) => r.load.ttfbMs.p50)), fmt(med(phase, name, (r) => r.load.ttfbMs.p99)),
        runs.filter((r) => r.phase === phase && r.target === name).reduce((n, r) => n + r.load.errors, 0),
      ]);
    }
  }
  notes.push(`calibration to ${fmt(100 * busyGoal, 0)} % busy (the first target's loop thread): ${calibrations.join('; ') || 'skipped (--concurrency)'}`);
  notes.push(`stream: ${values.replicas} mocks, profile llama-8b-a100 at time scale ${values['sat-time-scale']}, ${tokens} tokens with ignore_eos; `
    + `json: ${values.replicas} tiny mocks at time scale 0.01, 16 tokens; closed loop, ${seconds} s per run, ${rounds} rounds in alternating order; medians`);
  notes.push(`idle CPU, measured for 3 s before the rounds: ${idleNotes.join('; ')}; "less idle" subtracts it over each run's length`);
  notes.push('loop busy = CPU of the thread that runs the event loop (gateway main thread, nginx worker) / wall time of the run, the drain of the last requests included');
  notes.push('µs/event = proxy CPU per stream / SSE events per stream; marginal = (CPU per stream − CPU per JSON request) / events, both less idle: what a token event costs beyond the request');
  notes.push('reads and sends per request: read, readv, recvfrom, recvmsg and write, writev, sendto, sendmsg of the proxy (nginx: its worker), from perf stat; they include the client request\'s read and the upstream request\'s write');
  notes.push(`nginx: 1 worker, least_conn, keepalive to the upstreams, proxy_buffering off; gateway routing ${values.policy}, admission targets out of reach (no shedding), connect timeout 30 s`);
  for (const [mode, frames] of Object.entries(profiles)) {
    notes.push(`gateway main thread, ${mode}, perf self time (CPU-time samples): ${frames.map((f) => `${f.symbol} ${fmt(f.pct, 1)}%`).join('; ')}`);
  }
  notes.push(`load average (1, 5, 15 min) before ${loadBefore.map((x) => x.toFixed(2)).join(' ')}, after ${loadAfter.map((x) => x.toFixed(2)).join(' ')}`);
  return {
    title: `Relay at saturation: proxy cost per request and per token event, loop held near ${fmt(100 * busyGoal, 0)} % busy`,
    columns: ['mode', 'target', 'concurrency', 'req/s', 'ratio to nginx', 'loop busy %', 'proxy CPU µs/req', 'less idle µs/req', 'CPU ratio to nginx', 'events/req',
      'µs/event', 'marginal µs/event', 'reads/req', 'sends/req', 'sends per read', 'TTFB p50 ms', 'TTFB p99 ms', 'errors'],
    rows,
    notes,
    extra: { runs: runs.map((r) => ({ ...r, load: { ...r.load } })), calibrations, loadBefore, loadAfter, profiles },
  };
}
