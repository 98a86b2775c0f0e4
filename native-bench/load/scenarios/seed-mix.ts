// seed-mix: up to what request rate does the system hold the design's SLA under the design's traffic?
// The design's mix (seed-mix-requests.ts: shared system prompts, multi-turn chats, prompts to 32k, outputs to
// 4k, 1,800 / 300 tokens on average), every request a stream, sent open loop at each rate of an upward sweep
// for `--step-seconds`; a step holds when TTFT p50/p99 (prompts ≤ 4,000 tokens), TPOT p95 and the error rate
// are within the SLA (sla.ts). The sweep stops at the first step that breaks and reports the last that held,
// with the gateway's CPU per request at each rate (its process tree, /proc).
// Flags: --rates 10,20,40 (or --start R --factor F --max R), --step-seconds 20, --arrivals seed|constant|poisson
// (seed: the workload's own Poisson sessions with bursts; the others re-time its requests), --seed 1,
// --error-budget 0.01, --keep-going (sweep every rate even after a break); the stack: --replicas 4,
// --profile llama-8b-a100, --time-scale 0.1 (targets scale with it), --gateway-config JSON, --keep-logs,
// --cpu-prof (the gateway's threads profiled; self time by file for each thread in the notes);
// or --url URL --api-key KEY --model ID (time scale 1).
import { mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { topFrames } from '../../harness/cpuprofile-top.ts';
import { CpuMeter } from '../proc-cpu.ts';
import type { BenchScenario } from '../../types.ts';
import { arrivalOffsetsMs, parseArrivalKind } from '../arrivals.ts';
import { runOpenLoop } from '../open-loop.ts';
import type { ScheduledRequest } from '../open-loop.ts';
import { SeedMixRequests } from '../seed-mix-requests.ts';
import { lastHeldRate, scaledSla, summarizeStep } from '../sla.ts';
import { API_KEY, MODEL, parseJsonFlag, startStack } from '../stack.ts';

const f = (x: number, d = 1): string => (Number.isFinite(x) ? x.toFixed(d) : 'n/a');

export function sweepRates(v: { rates?: string; start: string; factor: string; max: string }): number[] {
  if (v.rates) return v.rates.split(',').map(Number).filter((r) => r > 0);
  const out: number[] = [];
  for (let r = Number(v.start); r <= Number(v.max); r = Math.round(r * Number(v.factor) * 10) / 10) out.push(r);
  return out;
}

/** The step's requests in due order; `retime` puts the n-th request on the n-th arrival of another schedule. */
function* schedule(mix: SeedMixRequests, retime: Float64Array | null): Generator<ScheduledRequest> {
  let i = 0;
  for (let r = mix.next(); r; r = mix.next(), i++) {
    const atMs = retime ? retime[i] : r.atMs;
    if (atMs === undefined) return;
    yield { atMs, body: r.body, stream: true, tag: String(r.promptTokens) };
  }
}

/** Resolves once the gateway reports no request in flight (gateway_inflight_requests), or after `maxMs`. */
async function untilIdle(url: string, maxMs: number): Promise<void> {
  const until = performance.now() + maxMs;
  while (performance.now() < until) {
    const text = await (await fetch(`${url}/metrics`)).text();
    if (/^gateway_inflight_requests 0$/m.test(text)) return;
    await sleep(250);
  }
}

/**
 * One line per gateway thread (V8 names the files CPU.<date>.<time>.<pid>.<thread id>.<seq>.cpuprofile; thread
 * 0 is the main thread): its busy time over the whole run (warm-up and idle included) and its top files.
 */
function profileByThread(dir: string): string[] {
  const files = readdirSync(dir).filter((name) => name.endsWith('.cpuprofile')).sort();
  if (files.length === 0) return [`gateway wrote no CPU profile in ${dir}`];
  return [`gateway CPU profiles in ${dir}`, ...files.map((name) => {
    const p = topFrames(join(dir, name), 6);
    const busyMs = p.totalMs * (1 - p.idlePct / 100);
    return `thread ${name.split('.')[4]}: busy ${f(busyMs, 0)} ms; by file ${p.byFile.map((x) => `${x.frame} ${f(x.selfPct, 1)}%`).join(', ')}`;
  })];
}

const seedMix: BenchScenario = async (args) => {
  const { values } = parseArgs({
    args,
    options: {
      rates: { type: 'string' }, start: { type: 'string', default: '10' }, factor: { type: 'string', default: '1.5' },
      max: { type: 'string', default: '400' }, 'step-seconds': { type: 'string', default: '20' },
      arrivals: { type: 'string', default: 'seed' }, seed: { type: 'string', default: '1' },
      'error-budget': { type: 'string', default: '0.01' }, 'keep-going': { type: 'boolean', default: false },
      replicas: { type: 'string', default: '4' }, profile: { type: 'string', default: 'llama-8b-a100' },
      'time-scale': { type: 'string', default: '0.1' }, 'gateway-config': { type: 'string' },
      'keep-logs': { type: 'boolean', default: false }, 'cpu-prof': { type: 'boolean', default: false },
      url: { type: 'string' }, 'api-key': { type: 'string' }, model: { type: 'string' },
    },
  });
  const rates = sweepRates(values);
  const stepMs = Number(values['step-seconds']) * 1000;
  const timeScale = values.url ? 1 : Number(values['time-scale']);
  const sla = scaledSla(timeScale);
  const model = values.model ?? MODEL;
  const apiKey = values['api-key'] ?? API_KEY;
  const cpuProfDir = values['cpu-prof'] && !values.url ? mkdtempSync(join(tmpdir(), 'seed-mix-cpuprof-')) : undefined;
  const stack = await startStack({
    url: values.url, replicas: Number(values.replicas), profile: values.profile, timeScale,
    gatewayConfig: parseJsonFlag(values['gateway-config']), keepLogs: values['keep-logs'],
    ...(cpuProfDir !== undefined ? { cpuProfDir } : {}),
  });
  const rows: Array<Array<string | number>> = [];
  let idleCpuMsPerS = NaN;
  const steps: Array<{ rate: number; held: boolean; summary: unknown; gatewayCpuMicrosPerRequest: number }> = [];
  try {
    // Warm-up: a short step at the first rate, unmeasured (JIT, connections, the mocks' tokenizer caches).
    await runOpenLoop({
      origins: [stack.gatewayUrl], path: '/v1/chat/completions', headers: { authorization: `Bearer ${apiKey}` },
      schedule: schedule(new SeedMixRequests({ model, rps: rates[0] ?? 10, durationMs: 3000, seed: 999, maxModelLen: 131_072 }), null),
    });
    // The gateway's CPU with no requests (registry scrapes, timers): part of every per-request figure below,
    // spread over fewer requests at low rates.
    if (stack.gatewayPid !== null) {
      const idle = new CpuMeter([stack.gatewayPid]);
      // The warm-up's long streams (outputs to 4k tokens) run on after its last arrival: wait them out.
      await untilIdle(stack.gatewayUrl, 120_000);
      await sleep(1000);
      idle.start();
      await sleep(4000);
      idleCpuMsPerS = idle.stop() / 4000;
    }
    for (const rate of rates) {
      const mix = new SeedMixRequests({ model, rps: rate, durationMs: stepMs, seed: Number(values.seed), maxModelLen: 131_072 });
      const kind = values.arrivals === 'seed' ? null : parseArrivalKind(values.arrivals);
      const retime = kind ? arrivalOffsetsMs(kind, rate, stepMs, Number(values.seed)) : null;
      const res = await runOpenLoop({
        origins: [stack.gatewayUrl], path: '/v1/chat/completions', headers: { authorization: `Bearer ${apiKey}` },
        schedule: schedule(mix, retime),
        cpuPids: stack.gatewayPid !== null ? { gateway: [stack.gatewayPid], mocks: stack.fleet?.pids ?? [] } : {},
      });
      const s = summarizeStep(res.records, sla, Number(values['error-budget']));
      const n = Math.max(1, s.requests);
      const gwCpu = (res.cpuMicros.gateway ?? NaN) / n;
      steps.push({ rate, held: s.held, summary: s, gatewayCpuMicrosPerRequest: gwCpu });
      rows.push([rate, s.requests, f(s.ok / (stepMs / 1000)), f(s.ttft.p50), f(s.ttft.p99), f(s.ttftLong.p99),
        f(s.tpot.p95, 2), f(s.total.p99 / 1000, 2), s.failed, s.statusCounts['429'] ?? 0,
        f(s.meanPromptTokens, 0), f(s.meanCompletionTokens, 0), f(gwCpu, 0), f((res.cpuMicros.mocks ?? NaN) / n, 0),
        f(res.clientCpuMicros / n, 0), f(s.sendLag.p99), s.held ? 'held' : s.missed.join('; ')]);
      console.error(`seed-mix ${rate} rps: ${s.held ? 'held' : `broke (${s.missed.join('; ')})`}`);
      if (!s.held && !values['keep-going']) break;
    }
  } finally {
    await stack.stop();
  }
  const profileNotes = cpuProfDir !== undefined ? profileByThread(cpuProfDir) : [];
  const held = lastHeldRate(steps);
  return {
    title: `load seed-mix: SLA held up to ${f(held, 1)} req/s (TTFT p50/p99 ≤ ${f(sla.ttftP50Ms)}/${f(sla.ttftP99Ms)} ms for prompts ≤ 4,000 tokens, TPOT p95 ≤ ${f(sla.tpotP95Ms)} ms)`,
    columns: ['offered req/s', 'requests', 'ok/s', 'TTFT p50 ms', 'TTFT p99 ms', 'TTFT p99 >4k ms', 'TPOT p95 ms',
      'e2e p99 s', 'failed', '429', 'prompt tok (usage)', 'output tok', 'gateway CPU µs/req', 'mocks CPU µs/req',
      'client CPU µs/req', 'send lag p99 ms', 'verdict'],
    rows,
    notes: [
      values.url ? `target ${values.url} (time scale 1)` : `gateway + ${values.replicas} × ${values.profile} mocks at time scale ${timeScale}: the design's targets × ${timeScale}`,
      `arrivals: ${values.arrivals}; ${values['step-seconds']} s per rate; last rate that held: ${f(held, 1)} req/s`,
      `gateway CPU idle (no requests): ${f(idleCpuMsPerS, 1)} ms per second, included in the per-request column`,
      ...profileNotes,
    ],
    extra: { steps, lastHeldRate: held, sla, idleCpuMsPerS },
  };
};

export default seedMix;
