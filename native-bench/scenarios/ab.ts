// A/B scenario: is the working tree's gateway faster or slower than a base git ref's, on the same machine,
// in the same minutes? Base and head gateways run side by side in front of the same zero-delay-ish mock
// replicas (profile tiny, smallest time scale); an unmeasured warm-up run of each side, then a head-vs-head noise run, then alternating rounds.
// Reports head/base ratios of req/s, TTFB and gateway CPU per request (uWS compare.js).
// The base tree is extracted with `git archive` into a temp dir (no change to the repo, its index or worktrees)
// and shares this checkout's node_modules. Thread: bench main thread; every process is its own.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { BenchScenario } from '../types.ts';
import { chatBody } from '../load/openai-bodies.ts';
import { startMockFleet } from '../harness/mock-fleet.ts';
import { startGatewayProcess } from '../harness/gateway-process.ts';
import { PERMISSIVE_ADMISSION } from '../harness/relay-saturation.ts';
import { startOtlpSink, type OtlpSink } from '../harness/otlp-sink.ts';
import { fmt, runRounds, RoundsView } from '../harness/rounds.ts';
import type { BenchTarget, RoundRun } from '../harness/rounds.ts';

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
const MODEL = 'bench-model';
const API_KEY = 'sk-bench-ab';

/** Extracts `ref`'s tree into a fresh temp directory and links this checkout's node_modules into it. */
function extractRef(ref: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'expediter-ab-base-'));
  const tar = execFileSync('git', ['-C', repoRoot, 'archive', '--format=tar', ref], { maxBuffer: 1 << 30 });
  execFileSync('tar', ['-x', '-C', dir], { input: tar });
  symlinkSync(join(repoRoot, 'node_modules'), join(dir, 'node_modules'), 'dir');
  return dir;
}

const ab: BenchScenario = async (args) => {
  const { values } = parseArgs({
    args,
    options: {
      base: { type: 'string', default: 'HEAD' },
      requests: { type: 'string', default: '3000' },
      'max-seconds': { type: 'string', default: '20' },
      rounds: { type: 'string', default: '4' },
      concurrency: { type: 'string', default: '32' },
      replicas: { type: 'string', default: '2' },
      'time-scale': { type: 'string', default: '0.01' },
      'max-tokens': { type: 'string', default: '16' },
      modes: { type: 'string', default: 'stream,json' },
      policy: { type: 'string', default: 'round-robin' },
      pin: { type: 'boolean', default: false },
      // Node flags per side, e.g. `--head-node-args=--max-semi-space-size=32` with `--base HEAD`: the same code
      // with and without a V8 setting.
      'base-node-args': { type: 'string', default: '' },
      'head-node-args': { type: 'string', default: '' },
      // The head gateway traces every request (sampler always_on, OTLP/protobuf) to a sink in this process:
      // with `--base HEAD`, tracing on against off on the same code.
      'head-tracing': { type: 'boolean', default: false },
      // Both sides' TTFT budget for every tier, ms (admission.ttft_ms_by_tier): on a machine loaded by other work
      // the mocks' first tokens come late, the GPU-time model learns it, and a 400 ms budget sheds every request.
      'ttft-ms': { type: 'string', default: '' },
      // Both sides with every admission target out of reach and a 30 s connect timeout (as `relay --saturate`):
      // the cost of relaying alone, with no 429 on a machine whose other work stretches the mocks' steps.
      'lax-admission': { type: 'boolean', default: false },
    },
  });
  const baseRef = values.base;
  const baseRev = execFileSync('git', ['-C', repoRoot, 'rev-parse', '--short', baseRef], { encoding: 'utf8' }).trim();
  const concurrency = Number(values.concurrency);
  const maxTokens = Number(values['max-tokens']);
  const rounds = Number(values.rounds);
  const gatewayCpus = values.pin ? '1' : undefined;
  const logDir = mkdtempSync(join(tmpdir(), 'expediter-ab-'));
  const baseDir = extractRef(baseRef);
  const stops: Array<() => Promise<void>> = [];
  const runs: Record<string, RoundRun[]> = {};
  let sink: OtlpSink | null = null;
  const noise: Record<string, number> = {};
  const cpuNoise: Record<string, number> = {};
  try {
    const fleet = await startMockFleet({
      repoRoot, logDir, count: Number(values.replicas), model: MODEL, profile: 'tiny',
      timeScale: Number(values['time-scale']), cpus: values.pin ? '0' : undefined,
      extraArgs: ['--max-num-seqs', '256', '--num-gpu-blocks', '8192'],
    });
    stops.push(fleet.stop);
    if (values['head-tracing']) {
      sink = await startOtlpSink();
      stops.push(sink.close);
    }
    const ttft = Number(values['ttft-ms']);
    const admission = values['lax-admission']
      ? {
        ...PERMISSIVE_ADMISSION,
        // The pool's own TTFT and TPOT targets out of reach too, as in relay --saturate.
        pools: [{
          id: 'bench', model: MODEL, mock_profile: 'tiny', engine: { ttft_target_ms: 3_600_000, tpot_target_ms: 3_600_000 },
          replicas: fleet.replicas.map((r) => ({ id: r.id, url: r.url })),
        }],
      }
      : values['ttft-ms'] !== '' ? { admission: { ttft_ms_by_tier: { premium: ttft, standard: ttft, batch: ttft } } } : {};
    const start = async (name: string, root: string, nodeArgs: string, tracing: OtlpSink | null = null): Promise<BenchTarget> => {
      const dir = mkdtempSync(join(logDir, `${name}-`));
      const gw = await startGatewayProcess({
        repoRoot: root, logDir: dir, model: MODEL, apiKey: API_KEY, replicas: fleet.replicas, policy: values.policy, cpus: gatewayCpus,
        nodeArgs: nodeArgs.split(' ').filter((a) => a.length > 0),
        configOverrides: { ...admission, ...(tracing !== null ? { tracing: { traces_endpoint: tracing.endpoint, protocol: 'http/protobuf', sampler: 'always_on' } } : {}) },
      });
      stops.push(gw.stop);
      return { name, origins: [gw.url], proxyPids: [gw.proc.pid] };
    };
    const base = await start('base', baseDir, values['base-node-args']);
    const head = await start('head', repoRoot, values['head-node-args'], sink);
    for (const mode of values.modes.split(',').filter((m) => m === 'stream' || m === 'json')) {
      const stream = mode === 'stream';
      const body = chatBody({ model: MODEL, maxTokens, stream });
      const outcome = await runRounds([base, head], head, rounds, (t) => ({
        path: '/v1/chat/completions',
        body,
        headers: { authorization: `Bearer ${API_KEY}` },
        stream,
        concurrency,
        requests: Number(values.requests),
        maxDurationMs: Number(values['max-seconds']) * 1000,
        cpuPids: { proxy: t.proxyPids, mocks: fleet.pids },
      }), mode);
      runs[mode] = outcome.runs;
      noise[mode] = outcome.noise;
      cpuNoise[mode] = outcome.cpuNoise;
    }
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
    rmSync(baseDir, { recursive: true, force: true });
    rmSync(logDir, { recursive: true, force: true });
  }

  const rows: Array<Array<string | number>> = [];
  for (const [mode, list] of Object.entries(runs)) {
    const v = new RoundsView(list);
    const cpu = (r: RoundRun['result']): number => r.cpuMicrosPerRequest.proxy ?? NaN;
    rows.push([
      mode,
      fmt(v.median('base', (r) => r.requestsPerSecond), 0),
      fmt(v.median('head', (r) => r.requestsPerSecond), 0),
      fmt(v.pairedRatio('head', 'base', (r) => r.requestsPerSecond), 3),
      fmt(v.median('base', cpu), 0),
      fmt(v.median('head', cpu), 0),
      fmt(v.pairedRatio('head', 'base', cpu), 3),
      fmt(v.pairedDelta('head', 'base', (r) => r.ttfbMs.p50), 3),
      fmt(v.pairedDelta('head', 'base', (r) => r.ttfbMs.p99), 3),
      fmt(100 * (noise[mode] ?? NaN), 1),
      fmt(100 * (cpuNoise[mode] ?? NaN), 1),
      v.of('base').reduce((a, r) => a + r.result.errors, 0) + v.of('head').reduce((a, r) => a + r.result.errors, 0),
    ]);
  }
  return {
    title: `A/B: gateway at ${baseRef} (${baseRev}) vs working tree`,
    columns: ['mode', 'base req/s', 'head req/s', 'head/base req/s', 'base CPU µs/req', 'head CPU µs/req',
      'head/base CPU', 'head-base TTFB p50 ms', 'head-base TTFB p99 ms', 'noise %', 'CPU noise %', 'errors'],
    rows,
    notes: [
      'ratios are medians over rounds of per-round ratios; a ratio inside 1 ± noise is no difference (noise: req/s, CPU noise: CPU per request, of two head runs after one unmeasured warm-up run of each side)',
      `${values.replicas} mock replicas (tiny, time scale ${values['time-scale']}); concurrency ${concurrency}; `
        + `${values.requests} requests or ${values['max-seconds']} s per run; ${rounds} rounds; policy ${values.policy}`,
      values.pin ? 'pinned: gateways on CPU 1, mocks on CPU 0' : 'not pinned',
      ...(values['base-node-args'] || values['head-node-args'] ? [`node flags: base \`${values['base-node-args']}\`, head \`${values['head-node-args']}\``] : []),
      ...(values['lax-admission'] ? ['both sides: admission targets out of reach, connect timeout 30 s (`--lax-admission`)']
        : values['ttft-ms'] !== '' ? [`both sides' TTFT budget ${values['ttft-ms']} ms for every tier`] : []),
      ...(sink !== null ? [`head traces every request (always_on, OTLP/protobuf): ${sink.posts} exports, ${(sink.bytes / 1e6).toFixed(1)} MB received`] : []),
    ],
    extra: { runs, noise, cpuNoise, baseRev },
  };
};

export default ab;
