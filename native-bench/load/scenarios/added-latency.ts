// added-latency: at a fixed open-loop rate, how much does the gateway add over going straight to a replica?
// Non-streaming: end-to-end time; streams: time to the first token's bytes (the first SSE event with text;
// the gateway sends its headers with it). Targets `direct` (the client round-robins over the mocks) and
// `gateway` (round-robin, memory quota, every stage on) in front of the same tiny, time-scaled mocks; rounds
// alternate the order; per round added = gateway − direct at p50 and p99; the table shows medians over rounds
// and the gateway's CPU per request (its process tree, /proc).
// Flags: --rate 1000, --seconds 10, --rounds 3, --modes json,stream, --max-tokens 16, --arrivals constant|poisson,
// --replicas 2, --time-scale 0.01, --gateway-config JSON, --keep-logs.
import { parseArgs } from 'node:util';
import type { BenchScenario } from '../../types.ts';
import { chatBody } from '../openai-bodies.ts';
import { arrivalOffsetsMs, parseArrivalKind } from '../arrivals.ts';
import { runOpenLoop } from '../open-loop.ts';
import type { RequestRecord, ScheduledRequest } from '../open-loop.ts';
import { failureKinds } from '../open-loop.ts';
import { median, summarize } from '../percentiles.ts';
import { API_KEY, MODEL, parseJsonFlag, startStack } from '../stack.ts';

const f = (x: number, d = 2): string => (Number.isFinite(x) ? x.toFixed(d) : 'n/a');

function* requests(offsets: Float64Array, body: string, stream: boolean): Generator<ScheduledRequest> {
  for (const atMs of offsets) yield { atMs, body, stream };
}

interface Run { target: string; round: number; p50: number; p99: number; failed: number; n: number; gwCpu: number; lag99: number; why: string }

const addedLatency: BenchScenario = async (args) => {
  const { values } = parseArgs({
    args,
    options: {
      rate: { type: 'string', default: '1000' }, seconds: { type: 'string', default: '10' },
      rounds: { type: 'string', default: '3' }, modes: { type: 'string', default: 'json,stream' },
      'max-tokens': { type: 'string', default: '16' }, arrivals: { type: 'string', default: 'constant' },
      replicas: { type: 'string', default: '2' }, 'time-scale': { type: 'string', default: '0.01' },
      'gateway-config': { type: 'string' }, 'keep-logs': { type: 'boolean', default: false }, seed: { type: 'string', default: '1' },
    },
  });
  const rate = Number(values.rate);
  const durationMs = Number(values.seconds) * 1000;
  const kind = parseArrivalKind(values.arrivals);
  const stack = await startStack({
    replicas: Number(values.replicas), profile: 'tiny', timeScale: Number(values['time-scale']),
    mockArgs: ['--max-num-seqs', '256', '--num-gpu-blocks', '8192'],
    gatewayConfig: parseJsonFlag(values['gateway-config']), keepLogs: values['keep-logs'],
  });
  const fleet = stack.fleet!;
  const targets = [
    { name: 'direct', origins: fleet.replicas.map((r) => r.url), pids: [] as number[] },
    { name: 'gateway', origins: [stack.gatewayUrl], pids: [stack.gatewayPid!] },
  ];
  const rows: Array<Array<string | number>> = [];
  const all: Record<string, Run[]> = {};
  try {
    for (const mode of values.modes.split(',')) {
      const stream = mode === 'stream';
      const body = chatBody({ model: MODEL, maxTokens: Number(values['max-tokens']), stream });
      const latency = (r: RequestRecord): number => (stream ? r.ttftMs : r.totalMs);
      const runs: Run[] = [];
      const once = async (t: typeof targets[number], round: number, ms: number): Promise<Run> => {
        const res = await runOpenLoop({
          origins: t.origins, path: '/v1/chat/completions', headers: { authorization: `Bearer ${API_KEY}` },
          schedule: requests(arrivalOffsetsMs(kind, rate, ms, Number(values.seed) + round), body, stream),
          cpuPids: { gateway: t.pids },
        });
        const ok = res.records.filter((r) => r.error === null && r.status === 200);
        const s = summarize(ok.map(latency));
        return {
          target: t.name, round, p50: s.p50, p99: s.p99, failed: res.records.length - ok.length, n: res.records.length,
          gwCpu: t.pids.length ? (res.cpuMicros.gateway ?? NaN) / Math.max(1, res.records.length) : NaN,
          lag99: summarize(res.records.map((r) => r.sendLagMs)).p99,
          why: failureKinds(res.records),
        };
      };
      for (const t of targets) await once(t, -1, Math.min(durationMs, 3000)); // warm-up, unmeasured
      for (let round = 0; round < Number(values.rounds); round++) {
        for (const t of round % 2 === 0 ? targets : [...targets].reverse()) {
          const run = await once(t, round, durationMs);
          runs.push(run);
          console.error(`${mode} round ${round + 1} ${t.name}: p50 ${f(run.p50)} p99 ${f(run.p99)} ms, failed ${run.failed}/${run.n} ${run.why}`);
        }
      }
      all[mode] = runs;
      const of = (name: string): Run[] => runs.filter((r) => r.target === name);
      const added = (q: 'p50' | 'p99'): number => median(of('gateway').map((g) => g[q] - (of('direct').find((d) => d.round === g.round)?.[q] ?? NaN)));
      for (const t of targets) {
        const rs = of(t.name);
        const isGw = t.name === 'gateway';
        rows.push([mode, t.name, rate, f(median(rs.map((r) => r.p50))), f(median(rs.map((r) => r.p99))),
          isGw ? f(added('p50')) : '-', isGw ? f(added('p99')) : '-', isGw ? f(median(rs.map((r) => r.gwCpu)), 0) : '-',
          rs.reduce((a, r) => a + r.failed, 0), f(median(rs.map((r) => r.lag99)))]);
      }
    }
  } finally {
    await stack.stop();
  }
  return {
    title: `load added-latency: gateway over direct at ${rate} req/s open loop (${values.arrivals})`,
    columns: ['mode', 'target', 'offered req/s', 'p50 ms', 'p99 ms', 'added p50 ms', 'added p99 ms', 'gateway CPU µs/req', 'failed', 'client send lag p99 ms'],
    rows,
    notes: [
      'json: end-to-end time; stream: time to the first token event. Medians over rounds; added = gateway − direct paired per round.',
      ...Object.values(all).flat().filter((r) => r.failed > 0).map((r) => `failed in round ${r.round + 1}, ${r.target}: ${r.why}`),
      `${values.replicas} tiny mocks at time scale ${values['time-scale']}, ${values['max-tokens']} output tokens, ${values.seconds} s per run`,
    ],
    extra: { runs: all },
  };
};

export default addedLatency;
