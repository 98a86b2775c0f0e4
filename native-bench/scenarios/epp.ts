// EPP scenario (issue 43): what does Expediter cost as Envoy's endpoint picker, per pick and per echoed
// response chunk, against its standalone front door on the same requests?
// One gateway process (src/main.ts, kv-aware, epp on) in front of two mock replicas (child processes). This
// process plays Envoy over real gRPC on loopback (the picker's own protos): per request the request headers
// and body, then the response phase. Measured: the gateway's main thread CPU (utime+stime from
// /proc/PID/task/PID/stat, where the request path, grpc-js and uWS all run; the registry's poller thread is
// not counted), less its idle rate, per request. Variants, rounds alternating their order:
//   epp pick      request phase → pick → response headers with end_of_stream (the attempt ends at once)
//   epp stream    the same, then a 300-token SSE response as Envoy streams it: one response_body message per
//                 vLLM event (302), each echoed back, ~600 messages; (stream − pick) / messages = per chunk
//   http 1 token  the standalone path, POST /v1/chat/completions stream, max_tokens 1, through to a replica
//   http stream   the same with 300 tokens (the replica's real stream, relayed by uWS)
// Run: `npm run bench -- epp [--requests N] [--rounds R] [--concurrency C] [--tokens T]`.
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { BenchScenario } from '../types.ts';
import { startGatewayProcess } from '../harness/gateway-process.ts';
import { startMockFleet } from '../harness/mock-fleet.ts';
import { freePort } from '../harness/processes.ts';
import { envoyClient, type EnvoyStream } from '../../src/epp/grpc-transport.ts';
import type { ProcessingRequest, ProcessingResponse } from '../../src/epp/ext-proc-messages.ts';

const MODEL = 'llama-3.1-8b-instruct';
const API_KEY = 'sk-bench-epp';
const SYSTEM = 'You are a careful assistant for a platform team that runs inference gateways on Kubernetes. ';

function body(i: number, tokens: number): Buffer {
  return Buffer.from(JSON.stringify({
    model: MODEL, stream: true, max_tokens: tokens, ignore_eos: true,
    messages: [{ role: 'system', content: SYSTEM.repeat(6) }, { role: 'user', content: `Question ${i}: how should a picker rank replicas?` }],
  }));
}

/** vLLM's stream for `tokens` tokens: role chunk, one chunk per token, usage, [DONE]; one Buffer per event. */
function sseEvents(tokens: number): Buffer[] {
  const head = `{"id":"chatcmpl-epp","object":"chat.completion.chunk","created":1764486000,"model":"${MODEL}"`;
  const out = [`data: ${head},"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}\n\n`];
  for (let i = 0; i < tokens; i++) {
    out.push(`data: ${head},"choices":[{"index":0,"delta":{"content":" tok${i}"},"logprobs":null,"finish_reason":${i === tokens - 1 ? '"length"' : 'null'}}]}\n\n`);
  }
  out.push('data: [DONE]\n\n');
  return out.map((s) => Buffer.from(s));
}

function threadTicks(pid: number): number {
  const text = readFileSync(`/proc/${pid}/task/${pid}/stat`, 'latin1');
  const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return Number(rest[11]) + Number(rest[12]);
}

/** Resolves when `pred` holds for a reply on the stream (checked as each arrives). */
function until(stream: EnvoyStream, pred: (m: ProcessingResponse) => boolean): Promise<ProcessingResponse> {
  return new Promise((resolve, reject) => {
    stream.on('data', (m) => { if (pred(m)) resolve(m); });
    stream.on('error', reject);
  });
}

const HEADERS = [[':method', 'POST'], [':path', '/v1/chat/completions'], ['content-type', 'application/json']].map(([key, v]) => ({ key: key!, raw_value: Buffer.from(v!) }));
const RESPONSE_HEADERS = [[':status', '200'], ['content-type', 'text/event-stream']].map(([key, v]) => ({ key: key!, raw_value: Buffer.from(v!) }));

const epp: BenchScenario = async (args) => {
  const { values } = parseArgs({ args, options: {
    requests: { type: 'string', default: '400' }, rounds: { type: 'string', default: '3' },
    concurrency: { type: 'string', default: '8' }, tokens: { type: 'string', default: '300' },
  } });
  const requests = Number(values.requests);
  const rounds = Number(values.rounds);
  const concurrency = Number(values.concurrency);
  const tokens = Number(values.tokens);
  const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
  const logDir = mkdtempSync(join(tmpdir(), 'bench-epp-'));
  const fleet = await startMockFleet({ repoRoot, logDir, count: 2, model: MODEL, profile: 'tiny', timeScale: 0.01, readyTimeoutMs: 300_000 });
  const eppPort = await freePort();
  const gw = await startGatewayProcess({
    repoRoot, logDir, model: MODEL, apiKey: API_KEY, replicas: fleet.replicas, policy: 'kv-aware', readyTimeoutMs: 300_000,
    configOverrides: {
      epp: { host: '127.0.0.1', port: eppPort, pool: 'bench', fallbacks: 2 },
      // Wide targets: the bench measures CPU, not whether a busy shared machine meets the SLO (the mocks'
      // steps, measured through a loaded machine, would otherwise get requests queued or shed).
      admission: {
        // The picker's requests are unmetered (standard tier); the standalone ones are the bench tenant's (premium).
        max_queued_requests: 100_000, max_queue_ms: 60_000, tpot_target_ms: 5000,
        queue_ms_by_tier: { premium: 60_000, standard: 60_000 },
        end_to_end_ms_by_tier: { premium: 3_600_000, standard: 3_600_000 }, ttft_ms_by_tier: { premium: 60_000, standard: 60_000 },
      },
      pools: [{ id: 'bench', model: MODEL, mock_profile: 'tiny', replicas: fleet.replicas.map((r) => ({ id: r.id, url: r.url })), engine: { tpot_target_ms: 5000, ttft_target_ms: 60_000 } }],
    },
  });
  const client = envoyClient(`127.0.0.1:${eppPort}`);
  const events = sseEvents(tokens);
  try {
    let seq = 0;
    const eppOne = async (withStream: boolean): Promise<void> => {
      const s = client.process();
      const picked = until(s, (m) => m.request_body?.response?.body_mutation?.streamed_response?.end_of_stream === true || m.immediate_response !== undefined);
      s.write({ request_headers: { headers: { headers: HEADERS } } } as ProcessingRequest);
      s.write({ request_body: { body: body(seq++, tokens), end_of_stream: true } } as ProcessingRequest);
      if ((await picked).immediate_response !== undefined) throw new Error(`refused: ${JSON.stringify((await picked).immediate_response)}`);
      if (!withStream) {
        const done = until(s, (m) => m.response_headers !== undefined);
        s.write({ response_headers: { headers: { headers: RESPONSE_HEADERS }, end_of_stream: true } } as ProcessingRequest);
        await done;
      } else {
        const done = until(s, (m) => m.response_body?.response?.body_mutation?.streamed_response?.end_of_stream === true);
        s.write({ response_headers: { headers: { headers: RESPONSE_HEADERS } } } as ProcessingRequest);
        for (const e of events) s.write({ response_body: { body: e, end_of_stream: false } } as ProcessingRequest);
        s.write({ response_body: { body: Buffer.alloc(0), end_of_stream: true } } as ProcessingRequest);
        await done;
      }
      s.end();
    };
    const httpOne = async (n: number): Promise<void> => {
      const res = await fetch(`${gw.url}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' }, body: body(seq++, n) });
      const text = await res.text();
      if (res.status !== 200 || !text.includes('[DONE]')) throw new Error(`standalone answered ${res.status}`);
    };
    const variants: Array<[string, () => Promise<void>]> = [
      ['epp pick', () => eppOne(false)],
      ['epp stream', () => eppOne(true)],
      ['http 1 token', () => httpOne(1)],
      [`http stream`, () => httpOne(tokens)],
    ];
    const runN = async (fn: () => Promise<void>, n: number): Promise<void> => {
      let next = 0;
      await Promise.all(Array.from({ length: concurrency }, async () => {
        while (next++ < n) await fn();
      }));
    };
    // Idle CPU of the main thread (timers, metrics): taken out of every run.
    const t0 = threadTicks(gw.proc.pid);
    const w0 = performance.now();
    await new Promise((r) => setTimeout(r, 2000));
    const idlePerMs = (threadTicks(gw.proc.pid) - t0) / (performance.now() - w0);
    for (const [, fn] of variants) await runN(fn, Math.min(100, requests)); // warm every path
    const results = new Map<string, number[]>();
    for (let r = 0; r < rounds; r++) {
      for (const [name, fn] of r % 2 === 0 ? variants : [...variants].reverse()) {
        const c0 = threadTicks(gw.proc.pid);
        const start = performance.now();
        await runN(fn, requests);
        const ticks = threadTicks(gw.proc.pid) - c0 - idlePerMs * (performance.now() - start);
        results.set(name, [...(results.get(name) ?? []), (ticks * 10_000) / requests]);
      }
    }
    const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    const us = (name: string): number => median(results.get(name)!);
    const messages = 2 * (events.length + 1);
    const perChunk = (us('epp stream') - us('epp pick')) / (events.length + 1);
    const perToken = (us('http stream') - us('http 1 token')) / (tokens - 1);
    const rows: Array<Array<string | number>> = variants.map(([name]) => [name, requests * rounds, us(name).toFixed(0), results.get(name)!.map((x) => x.toFixed(0)).join(' / ')]);
    return {
      title: `Endpoint picker: gateway main-thread CPU per request, as Envoy's EPP and standalone (${tokens}-token streams, ${concurrency} at once)`,
      columns: ['variant', 'requests', 'CPU µs/request (median of rounds)', 'rounds'],
      rows,
      notes: [
        `EPP per pick (request phase, pick, the headers-only end): ${us('epp pick').toFixed(0)} µs; standalone per request with 1 token (tokenize, admit, route, upstream HTTP, relay): ${us('http 1 token').toFixed(0)} µs.`,
        `EPP per echoed response chunk (one response_body in, one streamed_response out, the SSE relay's read): ${perChunk.toFixed(1)} µs; a ${tokens}-token stream is ${messages} messages: ${(perChunk * (events.length + 1)).toFixed(0)} µs. Standalone per relayed token event: ${perToken.toFixed(1)} µs.`,
        'CPU of the gateway process\'s main thread only (clock ticks of 10 ms, idle rate taken out); the client playing Envoy and the mocks run in other processes. A shared 2-core machine moves these figures by 20 % or more between runs.',
      ],
      extra: { results: Object.fromEntries(results), idleTicksPerMs: idlePerMs, perChunkUs: perChunk, perTokenUs: perToken },
    };
  } finally {
    client.close();
    await gw.stop();
    await fleet.stop();
  }
};

export default epp;
