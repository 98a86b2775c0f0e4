// Relay scenario (issue 3): what does the gateway add on the request path compared with going straight to
// a replica, and how does it compare with a tuned nginx in front of the same replicas?
// Targets: direct (client round-robins over the mocks), gateway (round-robin policy, memory quota), floor (the
// gateway's stack with none of its logic: harness/minimal-relay.ts; `floor-raw` swaps undici for the gateway's own
// HTTP/1.1 client, src/upstream/upstream-client.ts; `floor-node` swaps uWS for node:http), nginx with 1 worker and with `auto` workers. Modes: 16-token SSE streams and non-streaming
// JSON, at concurrency 32 (and any others listed: `--concurrency 32,1` adds an unloaded-latency pass).
// Method (uWS compare.js style): an unmeasured warm-up run of every target, a same-target noise run, then
// rounds in alternating order; per-round figures are paired (added TTFB = target - direct in the same round)
// and the median over rounds reported.
// `--saturate` runs harness/relay-saturation.ts instead: gateway, floor-raw and nginx (least_conn) with the
// gateway's event loop held about 70 % busy; CPU per request, per token event, and sends per upstream read.
// Thread: bench main thread (the load generator); every target and each mock replica is its own process.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { BenchScenario } from '../types.ts';
import { chatBody } from '../load/openai-bodies.ts';
import { startMockFleet } from '../harness/mock-fleet.ts';
import { startGatewayProcess } from '../harness/gateway-process.ts';
import { startNginx } from '../nginx/nginx-proxy.ts';
import { startFloorRelay } from '../harness/floor-process.ts';
import { topFrames } from '../harness/cpuprofile-top.ts';
import { fmt, runRounds, RoundsView } from '../harness/rounds.ts';
import { relaySaturation } from '../harness/relay-saturation.ts';
import type { BenchTarget, RoundRun } from '../harness/rounds.ts';

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
const MODEL = 'bench-model';
const API_KEY = 'sk-bench-relay';

const relay: BenchScenario = async (args) => {
  if (args.includes('--saturate')) {
    // The proxies' cost with the event loop held busy (harness/relay-saturation.ts): its own flags.
    const dir = mkdtempSync(join(tmpdir(), 'expediter-relay-sat-'));
    try {
      return await relaySaturation(args.filter((a) => a !== '--saturate'), repoRoot, dir);
    } finally {
      if (!args.includes('--keep-logs')) rmSync(dir, { recursive: true, force: true });
    }
  }
  const { values } = parseArgs({
    args,
    options: {
      requests: { type: 'string', default: '3000' },
      'max-seconds': { type: 'string', default: '20' },
      rounds: { type: 'string', default: '3' },
      concurrency: { type: 'string', default: '32' },
      replicas: { type: 'string', default: '2' },
      profile: { type: 'string', default: 'tiny' },
      'time-scale': { type: 'string', default: '0.01' },
      'max-tokens': { type: 'string', default: '16' },
      /** Requests per run at concurrency below 8 (the unloaded pass); its p99 is the 1 % tail of this many. */
      'unloaded-requests': { type: 'string', default: '1000' },
      modes: { type: 'string', default: 'stream,json' },
      /** Also gateway-<N>t: the gateway with server.threads N (e.g. gateway-2t beside nginx-auto on 2 cores). */
      targets: { type: 'string', default: 'direct,gateway,floor,floor-raw,floor-node,nginx,nginx-auto' },
      pin: { type: 'boolean', default: false },
      'cpu-prof': { type: 'boolean', default: false },
      'keep-logs': { type: 'boolean', default: false },
      /** JSON merged over the generated gateway config, per top-level section: '{"registry":{"scrape_interval_ms":1000}}'. */
      'gateway-config': { type: 'string', default: '{}' },
      /** Extra node flags for the gateway, space-separated (e.g. "--trace-gc"); see its log with --keep-logs. */
      'gateway-node-args': { type: 'string', default: '' },
    },
  });
  const requests = Number(values.requests);
  const rounds = Number(values.rounds);
  const concurrencies = values.concurrency.split(',').map(Number).filter((c) => c > 0);
  const maxTokens = Number(values['max-tokens']);
  const wanted = values.targets.split(',');
  const modes = values.modes.split(',').filter((m) => m === 'stream' || m === 'json');
  // --pin: the proxy alone on CPU 1; the mocks and this process (the load generator, all its threads) on CPU 0.
  // The question it answers: with a core of its own, as a gateway has in production, does the proxy cap the
  // system's throughput, or is the backend (here the mocks and the client sharing one core) the limit?
  const proxyCpus = values.pin ? '1' : undefined;
  const mockCpus = values.pin ? '0' : undefined;
  if (values.pin) execFileSync('taskset', ['-a', '-p', '-c', '0', String(process.pid)], { stdio: 'ignore' });

  const logDir = mkdtempSync(join(tmpdir(), 'expediter-relay-'));
  const cpuProfDir = values['cpu-prof'] ? join(logDir, 'cpuprof') : undefined;
  if (cpuProfDir) mkdirSync(cpuProfDir);
  const stops: Array<() => Promise<void>> = [];
  const notes: string[] = [];
  const runs: Record<string, RoundRun[]> = {};
  const noise: Record<string, number> = {};
  const cpuNoise: Record<string, number> = {};
  let profileSummary: ReturnType<typeof topFrames> | null = null;
  let noiseTarget = 'nginx';
  try {
    const fleet = await startMockFleet({
      repoRoot, logDir, count: Number(values.replicas), model: MODEL, profile: values.profile,
      timeScale: Number(values['time-scale']), cpus: mockCpus,
      // Room for every stream at once (c=32 over round-robin can put more than tiny's 16 seqs on one replica),
      // so the mock never queues and the proxy is what differs between targets.
      extraArgs: ['--max-num-seqs', '256', '--num-gpu-blocks', '8192'],
    });
    stops.push(fleet.stop);
    const targets: BenchTarget[] = [];
    if (wanted.includes('direct')) targets.push({ name: 'direct', origins: fleet.replicas.map((r) => r.url), proxyPids: [] });
    if (wanted.includes('gateway')) {
      const gw = await startGatewayProcess({
        repoRoot, logDir, model: MODEL, apiKey: API_KEY, replicas: fleet.replicas, cpus: proxyCpus, cpuProfDir,
        configOverrides: JSON.parse(values['gateway-config']) as Record<string, unknown>,
        nodeArgs: values['gateway-node-args'].split(' ').filter((a) => a.length > 0),
      });
      stops.push(gw.stop);
      targets.push({ name: 'gateway', origins: [gw.url], proxyPids: [gw.proc.pid] });
    }
    // gateway-<N>t: the same gateway with server.threads N (acceptor threads), side by side with the others.
    for (const name of wanted.filter((w) => /^gateway-\d+t$/.test(w))) {
      const overrides = JSON.parse(values['gateway-config']) as Record<string, Record<string, unknown> | undefined>;
      const gw = await startGatewayProcess({
        repoRoot, logDir, model: MODEL, apiKey: API_KEY, replicas: fleet.replicas, cpus: proxyCpus, cpuProfDir,
        configOverrides: { ...overrides, server: { ...overrides.server, threads: Number(/\d+/.exec(name)![0]) } },
        nodeArgs: values['gateway-node-args'].split(' ').filter((a) => a.length > 0),
      });
      stops.push(gw.stop);
      targets.push({ name, origins: [gw.url], proxyPids: [gw.proc.pid] });
    }
    for (const [name, client, server] of [['floor', 'undici', 'uws'], ['floor-raw', 'raw', 'uws'], ['floor-node', 'undici', 'node']] as const) {
      if (!wanted.includes(name)) continue;
      const floor = await startFloorRelay({ repoRoot, logDir, upstreams: fleet.replicas.map((r) => r.url), cpus: proxyCpus, client, server });
      stops.push(floor.stop);
      targets.push({ name, origins: [floor.url], proxyPids: [floor.proc.pid] });
    }
    for (const [name, workers] of [['nginx', 1], ['nginx-auto', 'auto']] as const) {
      if (!wanted.includes(name)) continue;
      const ng = await startNginx({ upstreams: fleet.replicas.map((r) => r.hostPort), workerProcesses: workers, cpus: proxyCpus });
      stops.push(ng.stop);
      targets.push({ name, origins: [ng.url], proxyPids: [ng.proc.pid] });
    }
    const baseline = targets.find((t) => t.name === 'nginx') ?? targets[0];
    if (!baseline) throw new Error('no targets');
    noiseTarget = baseline.name;

    for (const mode of modes) {
      const stream = mode === 'stream';
      const body = chatBody({ model: MODEL, maxTokens, stream });
      for (const concurrency of concurrencies) {
        const label = concurrencies.length > 1 ? `${mode} c=${concurrency}` : mode;
        const outcome = await runRounds(targets, baseline, rounds, (t) => ({
          path: '/v1/chat/completions',
          body,
          headers: { authorization: `Bearer ${API_KEY}` },
          stream,
          concurrency,
          // An unloaded pass needs fewer requests for stable percentiles than a loaded one gets in the same time.
          requests: concurrency < 8 ? Number(values['unloaded-requests']) : requests,
          maxDurationMs: Number(values['max-seconds']) * 1000,
          cpuPids: { proxy: t.proxyPids, mocks: fleet.pids },
        }), label);
        runs[label] = outcome.runs;
        noise[label] = outcome.noise;
        cpuNoise[label] = outcome.cpuNoise;
      }
    }
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
    if (cpuProfDir) {
      // CPU.<date>.<time>.<pid>.<thread id>.<seq>.cpuprofile: thread 0 is the acceptor (main) thread.
      const files = readdirSync(cpuProfDir).filter((f) => f.endsWith('.cpuprofile'));
      const file = files.find((f) => f.split('.')[4] === '0') ?? files[0];
      if (file) profileSummary = topFrames(join(cpuProfDir, file), 15);
      notes.push(file ? `gateway CPU profile: ${join(cpuProfDir, file)}` : 'gateway wrote no CPU profile (did it exit on SIGTERM?)');
    }
    if (!values['keep-logs'] && !cpuProfDir) rmSync(logDir, { recursive: true, force: true });
    else notes.push(`logs kept in ${logDir}`);
  }

  const withAuto = wanted.includes('nginx-auto');
  const columns = ['mode', 'target', 'req/s', 'ratio to nginx', ...(withAuto ? ['ratio to nginx-auto'] : []), 'TTFB p50 ms', 'TTFB p99 ms', 'added TTFB p50 ms',
    'added TTFB p99 ms', 'proxy CPU µs/req', 'proxy req/s per core', 'mock CPU µs/req', 'client CPU µs/req', 'frames/req', 'errors'];
  const rows: Array<Array<string | number>> = [];
  for (const [mode, list] of Object.entries(runs)) {
    const v = new RoundsView(list);
    for (const name of v.targets()) {
      const proxied = name !== 'direct';
      const proxyCpu = v.median(name, (r) => r.cpuMicrosPerRequest.proxy ?? NaN);
      rows.push([
        mode, name,
        fmt(v.median(name, (r) => r.requestsPerSecond), 0),
        fmt(v.pairedRatio(name, 'nginx', (r) => r.requestsPerSecond)),
        ...(withAuto ? [fmt(v.pairedRatio(name, 'nginx-auto', (r) => r.requestsPerSecond))] : []),
        fmt(v.median(name, (r) => r.ttfbMs.p50)),
        fmt(v.median(name, (r) => r.ttfbMs.p99)),
        proxied ? fmt(v.pairedDelta(name, 'direct', (r) => r.ttfbMs.p50)) : '-',
        proxied ? fmt(v.pairedDelta(name, 'direct', (r) => r.ttfbMs.p99)) : '-',
        proxied ? fmt(proxyCpu, 0) : '-',
        proxied ? fmt(1e6 / proxyCpu, 0) : '-',
        fmt(v.median(name, (r) => r.cpuMicrosPerRequest.mocks ?? NaN), 0),
        fmt(v.median(name, (r) => r.clientCpuMicrosPerRequest), 0),
        fmt(v.median(name, (r) => r.framesPerRequest), 1),
        v.of(name).reduce((acc, r) => acc + r.result.errors, 0),
      ]);
    }
  }
  for (const [mode, n] of Object.entries(noise)) {
    const c = cpuNoise[mode] ?? NaN;
    notes.push(`noise floor (${mode}): ${noiseTarget} run twice after a warm-up run of every target, req/s differ by ${fmt(100 * n, 1)}%`
      + (Number.isFinite(c) ? `, CPU per request by ${fmt(100 * c, 1)}%` : ''));
  }
  notes.push(`${values.replicas} mock replicas (profile ${values.profile}, time scale ${values['time-scale']}), each its own process; `
    + `concurrency ${concurrencies.join(' and ')}; ${requests} requests (${values['unloaded-requests']} below concurrency 8) or ${values['max-seconds']} s per run; ${rounds} rounds; `
    + `${maxTokens} output tokens with ignore_eos; include_usage requested on every target; gateway LOG_LEVEL=warn, nginx access_log off`);
  if (values['gateway-config'] !== '{}') notes.push(`gateway config overrides: ${values['gateway-config']}`);
  notes.push(values.pin ? 'pinned: proxy alone on CPU 1; mocks and the load generator on CPU 0 (taskset)' : 'not pinned (shared machine: read the ratios and CPU/req, not raw req/s)');
  notes.push('proxy req/s per core = 1e6 / proxy CPU µs per request: the ceiling of a proxy on one core, independent of '
    + 'the mock and client sharing the box (for nginx auto it is per core summed over workers)');
  notes.push('TTFB = time to the first body byte (the first SSE data frame when streaming); medians over rounds of per-run percentiles');
  if (profileSummary) {
    notes.push(`gateway profile top frames (self time, ${fmt(profileSummary.idlePct, 0)}% idle): `
      + profileSummary.byFrame.slice(0, 10).map((f) => `${f.frame} ${fmt(f.selfPct, 1)}%`).join('; '));
  }
  return {
    title: `Relay: direct vs gateway vs nginx, concurrency ${concurrencies.join(' and ')}`,
    columns,
    rows,
    notes,
    extra: { runs, noise, cpuNoise, profile: profileSummary },
  };
};

export default relay;
