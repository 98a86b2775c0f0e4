// mock-cost scenario (issue 2): how much CPU does one mock vLLM replica burn per request and per generated
// token, so we know how many replicas one core can simulate? Method: one mock in its own process
// (`test/mock-replica/cli.ts`, profile tiny at --time-scale 0.01 so engine steps are near zero and the
// mock's own work dominates); a closed loop of --concurrency streaming chat requests from this process;
// the child's utime+stime read from /proc around each run (the client's CPU is not counted). Runs, in
// alternating order over --rounds: `1 token` (the per-request baseline: HTTP, JSON, tokenize, engine
// add/finish), `N tokens` (ignore_eos, max_tokens N), `1 token, 1.5k prompt` (tokenization of a long prompt).
// Per-token CPU = (CPU of N-token run − CPU of 1-token run) / (requests × (N − 1)). Ratios are against the
// 1-token baseline. An idle window measures the CPU the mock burns doing nothing (its noise floor).
// Thread: bench main thread (client), plus the mock child process.
import { parseArgs } from 'node:util';
import type { BenchScenario } from '../types.ts';
import { cpuMicros } from '../load/proc-cpu.ts';
import { spawnMockReplica } from '../../test/mock-replica/spawn-replica.ts';

interface RunSpec {
  name: string;
  maxTokens: number;
  promptWords: number;
}

interface RunResult {
  cpuMicros: number;
  wallMs: number;
  tokens: number;
}

async function oneRequest(url: string, spec: RunSpec, prompt: string): Promise<number> {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content: prompt }], max_tokens: spec.maxTokens, ignore_eos: true, stream: true }),
  });
  const text = await res.text();
  if (!text.endsWith('data: [DONE]\n\n')) throw new Error(`bad stream: ${text.slice(0, 200)}`);
  return spec.maxTokens;
}

async function run(url: string, pid: number, spec: RunSpec, requests: number, concurrency: number, seq: { n: number }): Promise<RunResult> {
  const cpu0 = cpuMicros([pid], false);
  const t0 = performance.now();
  let next = 0;
  let tokens = 0;
  const worker = async (): Promise<void> => {
    while (next < requests) {
      next++;
      // A distinct first word per request, so prompts do not share prefix-cache blocks across runs.
      const prompt = `r${seq.n++} ` + 'lorem ipsum dolor sit amet '.repeat(Math.max(1, Math.round(spec.promptWords / 5)));
      tokens += await oneRequest(url, spec, prompt);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return { cpuMicros: cpuMicros([pid], false) - cpu0, wallMs: performance.now() - t0, tokens };
}

const mockCost: BenchScenario = async (args) => {
  const { values } = parseArgs({
    args,
    options: {
      requests: { type: 'string', default: '300' },
      tokens: { type: 'string', default: '128' },
      concurrency: { type: 'string', default: '16' },
      rounds: { type: 'string', default: '3' },
      'time-scale': { type: 'string', default: '0.01' },
    },
  });
  const requests = Number(values.requests);
  const outTokens = Number(values.tokens);
  const concurrency = Number(values.concurrency);
  const rounds = Number(values.rounds);
  const specs: RunSpec[] = [
    { name: '1 token, short prompt', maxTokens: 1, promptWords: 10 },
    { name: `${outTokens} tokens, short prompt`, maxTokens: outTokens, promptWords: 10 },
    { name: '1 token, 1.5k-token prompt', maxTokens: 1, promptWords: 1500 },
  ];
  const mock = await spawnMockReplica(['--profile', 'tiny', '--time-scale', values['time-scale'], '--max-num-seqs', String(Math.max(16, concurrency))]);
  const seq = { n: 0 };
  const totals = specs.map(() => ({ cpuMicros: 0, wallMs: 0, tokens: 0, requests: 0 }));
  let idleMicrosPerSecond = 0;
  try {
    // Warm-up: JIT, tokenizer caches, connection pool.
    await run(mock.url, mock.pid, specs[1]!, Math.min(100, requests), concurrency, seq);
    const idle0 = cpuMicros([mock.pid], false);
    await new Promise((r) => setTimeout(r, 2000));
    idleMicrosPerSecond = (cpuMicros([mock.pid], false) - idle0) / 2;
    for (let round = 0; round < rounds; round++) {
      const order = round % 2 === 0 ? specs.map((_, i) => i) : specs.map((_, i) => specs.length - 1 - i);
      for (const i of order) {
        const r = await run(mock.url, mock.pid, specs[i]!, requests, concurrency, seq);
        const t = totals[i]!;
        t.cpuMicros += r.cpuMicros;
        t.wallMs += r.wallMs;
        t.tokens += r.tokens;
        t.requests += requests;
      }
    }
  } finally {
    await mock.kill();
  }
  const perRequest = totals.map((t) => t.cpuMicros / t.requests);
  const base = perRequest[0]!;
  const perToken = (perRequest[1]! - base) / (outTokens - 1);
  const rows = specs.map((s, i) => {
    const t = totals[i]!;
    return [
      s.name, t.requests, s.maxTokens, (t.cpuMicros / 1000).toFixed(0), perRequest[i]!.toFixed(0),
      (perRequest[i]! / base).toFixed(2), ((t.requests / t.wallMs) * 1000).toFixed(0), ((t.cpuMicros / t.wallMs) / 10).toFixed(0),
    ];
  });
  const tokensPerCoreSecond = 1e6 / perToken;
  return {
    title: 'Mock replica CPU per request and per generated token (streaming chat, child process CPU from /proc)',
    columns: ['run', 'requests', 'tokens/request', 'mock CPU ms', 'CPU µs/request', 'ratio vs 1-token', 'req/s', 'mock CPU %'],
    rows,
    notes: [
      `per generated token: ${perToken.toFixed(1)} µs of mock CPU → one core streams ≈${Math.round(tokensPerCoreSecond).toLocaleString('en-US')} tokens/s`,
      `per request (HTTP + JSON + tokenize + engine, 1 token): ${base.toFixed(0)} µs; a 1.5k-token prompt adds ${(perRequest[2]! - base).toFixed(0)} µs`,
      `idle mock: ${(idleMicrosPerSecond / 1e4).toFixed(2)} % of a core`,
      `${rounds} rounds in alternating order, ${concurrency} concurrent streams, --time-scale ${values['time-scale']}; /proc resolution 10 ms per reading`,
      'Replicas per core ≈ 1e6 / (req/s per replica × µs/request + tokens/s per replica × µs/token).',
    ],
    extra: { perRequestMicros: base, perTokenMicros: perToken, longPromptMicros: perRequest[2], idleMicrosPerSecond },
  };
};

export default mockCost;
