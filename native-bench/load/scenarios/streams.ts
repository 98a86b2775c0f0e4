// streams: how much gateway memory does one open stream hold, with N streams open at once (each stream a
// client socket and a replica socket)? The mocks answer every stream slowly (`slow` fault: one token every
// `--delay-ms`), so streams stay open; the client opens `--streams` of them open loop at `--open-rate`, holds
// them, and mid-hold reads the gateway's resident set (VmRSS) and its open sockets from /proc. Per stream =
// (RSS with N open − RSS before, after a warm-up) / streams held at that moment (the gateway's added sockets / 2),
// and the slope of RSS against streams held, sampled once a second through the ramp (the warm-up leaves garbage
// that the collector may return during the ramp, which the difference counts against the streams and the slope
// mostly does not).
// N is capped by the open-file limit (`ulimit -n`): the gateway holds two sockets per stream, so
// N ≤ (limit − 200) / 2; the table says when it capped the asked N.
// Flags: --streams 20000, --open-rate 1000, --hold-seconds 10, --delay-ms 1000, --replicas 2, --gateway-config
// JSON, --keep-logs.
import { readdirSync, readlinkSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import type { BenchScenario } from '../../types.ts';
import { chatBody } from '../openai-bodies.ts';
import { arrivalOffsetsMs } from '../arrivals.ts';
import { failureKinds, runOpenLoop } from '../open-loop.ts';
import type { ScheduledRequest } from '../open-loop.ts';
import { API_KEY, MODEL, openFileLimit, parseJsonFlag, rssBytes, startStack } from '../stack.ts';

function socketsOf(pid: number): number {
  let n = 0;
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      if (readlinkSync(`/proc/${pid}/fd/${fd}`).startsWith('socket:')) n++;
    } catch { /* closed meanwhile */ }
  }
  return n;
}

/** Least-squares slope of RSS against streams held (bytes per stream); NaN with fewer than 3 points. */
export function rssSlope(points: ReadonlyArray<{ held: number; rss: number }>): number {
  const n = points.length;
  if (n < 3) return Number.NaN;
  let sx = 0; let sy = 0; let sxx = 0; let sxy = 0;
  for (const p of points) { sx += p.held; sy += p.rss; sxx += p.held * p.held; sxy += p.held * p.rss; }
  const den = n * sxx - sx * sx;
  return den === 0 ? Number.NaN : (n * sxy - sx * sy) / den;
}

const streams: BenchScenario = async (args) => {
  const { values } = parseArgs({
    args,
    options: {
      streams: { type: 'string', default: '20000' }, 'open-rate': { type: 'string', default: '1000' },
      'hold-seconds': { type: 'string', default: '10' }, 'delay-ms': { type: 'string', default: '1000' },
      replicas: { type: 'string', default: '2' }, 'gateway-config': { type: 'string' },
      'keep-logs': { type: 'boolean', default: false },
    },
  });
  const limit = openFileLimit();
  const asked = Number(values.streams);
  const cap = Math.floor((limit - 200) / 2);
  const n = Math.min(asked, cap);
  const replicas = Number(values.replicas);
  const delayMs = Number(values['delay-ms']);
  const rampMs = (n / Number(values['open-rate'])) * 1000;
  const holdMs = Number(values['hold-seconds']) * 1000;
  // Long enough to stay open through the ramp and the hold, then end on their own.
  const tokens = Math.ceil((rampMs + holdMs + 3000) / delayMs);
  const perReplica = Math.ceil(n / replicas) + 64;
  const stack = await startStack({
    replicas, profile: 'tiny', timeScale: 0.01,
    mockArgs: ['--max-num-seqs', String(perReplica), '--num-gpu-blocks', String(perReplica * (Math.ceil(tokens / 16) + 4)), '--max-num-batched-tokens', '65536'],
    gatewayConfig: { upstream: { connections_per_replica: perReplica }, ...parseJsonFlag(values['gateway-config']) },
    keepLogs: values['keep-logs'],
  });
  const pid = stack.gatewayPid!;
  const fleet = stack.fleet!;
  const rows: Array<Array<string | number>> = [];
  let extra: Record<string, unknown> = {};
  try {
    const headers = { authorization: `Bearer ${API_KEY}` };
    const run = (count: number, rate: number, body: string): Promise<Awaited<ReturnType<typeof runOpenLoop>>> => {
      const offsets = arrivalOffsetsMs('constant', rate, (count / rate) * 1000);
      const schedule = function* (): Generator<ScheduledRequest> { for (const atMs of offsets) yield { atMs, body, stream: true }; };
      return runOpenLoop({ origins: [stack.gatewayUrl], path: '/v1/chat/completions', headers, schedule: schedule(), maxConnections: count + 16, requestTimeoutMs: rampMs + holdMs + 60_000 });
    };
    // Warm-up at full speed (JIT, the upstream client's paths), then the baseline.
    await run(Math.min(2000, n), 500, chatBody({ model: MODEL, maxTokens: 16, stream: true }));
    await sleep(2000);
    const rss0 = rssBytes(pid);
    const sockets0 = socketsOf(pid);
    for (const r of fleet.replicas) {
      const res = await fetch(`${r.url}/_mock/faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ mode: 'slow', delay_ms: delayMs }) });
      if (res.status !== 200) throw new Error(`${r.url}/_mock/faults answered ${res.status}`);
    }
    const startedAt = performance.now();
    const pending = run(n, Number(values['open-rate']), chatBody({ model: MODEL, maxTokens: tokens, stream: true }));
    // RSS against streams held, once a second through the ramp: the slope is the memory each added stream
    // holds, free of what the warm-up left for the collector (the difference from rss0 carries that).
    const points: Array<{ held: number; rss: number }> = [];
    const sampler = setInterval(() => {
      try {
        points.push({ held: Math.max(0, socketsOf(pid) - sockets0) / 2, rss: rssBytes(pid) });
      } catch { /* the gateway is gone: the run fails below */ }
    }, 1000);
    await sleep(rampMs + holdMs / 2);
    clearInterval(sampler);
    const sampleAtMs = performance.now() - startedAt;
    const rss1 = rssBytes(pid);
    const sockets1 = socketsOf(pid);
    const res = await pending;
    // Open at the sample: its first token had arrived and its last had not.
    const open = res.records.filter((r) => r.atMs + r.ttftMs <= sampleAtMs && r.atMs + r.totalMs > sampleAtMs).length;
    const failed = res.records.filter((r) => r.error !== null || r.status !== 200).length;
    // Streams the gateway held at the sample: a client and a replica socket each. Counted from its sockets, not
    // from the client's records: a stream accepted but still waiting for its first token holds both sockets too.
    const held = Math.floor((sockets1 - sockets0) / 2);
    const perStream = (rss1 - rss0) / Math.max(1, held);
    const slope = rssSlope(points.filter((p) => p.held >= n / 10));
    rows.push([asked, n, open, held, (rss0 / 2 ** 20).toFixed(1), (rss1 / 2 ** 20).toFixed(1), (perStream / 1024).toFixed(2),
      Number.isFinite(slope) ? (slope / 1024).toFixed(2) : 'n/a', failed]);
    extra = { limit, cap, rss0, rss1, sockets0, sockets1, open, tokens, sampleAtMs, points, slope, failures: failureKinds(res.records) };
    if (failed > 0) console.error(`failed: ${failureKinds(res.records)}`);
  } finally {
    await stack.stop();
  }
  return {
    title: `load streams: gateway memory per open stream (${n} streams)`,
    columns: ['asked', 'sent', 'streaming at sample (first token in)', 'held at sample (gateway sockets / 2)', 'gateway RSS before MiB', 'RSS with streams MiB', 'KiB per open stream (difference)', 'KiB per added stream (slope over the ramp)', 'failed'],
    rows,
    notes: [
      `open-file limit ${limit}: at most ${cap} streams (two gateway sockets each)${n < asked ? `; asked ${asked}, capped` : ''}`,
      ...(typeof extra.failures === 'string' && extra.failures ? [`failed: ${extra.failures}`] : []),
      `each stream: one token every ${delayMs} ms from ${replicas} tiny mocks; opened at ${values['open-rate']}/s, sampled mid-hold`,
    ],
    extra,
  };
};

export default streams;
