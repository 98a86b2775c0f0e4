// `npm run bench -- overload-demo [--replicas 4] [--streams 60] [--max-tokens 32] [--policy kv-aware]`
// Question: on a demo-like fleet under a burst it cannot serve, does the gateway admit only what it can start
// within the TTFT SLO and answer the rest at once? Setup: `--replicas` mock replicas of the 8B A100 profile in
// real time, each its own process, and the gateway as its own process (the demo's 8B pool settings, the
// given policy, the schema's admission defaults). Load: `--streams` concurrent streaming chat requests, each a
// distinct ~1,500-token prompt, `max_tokens` fixed with ignore_eos. Measured at the client: each answer's
// status and Retry-After, a 429's answer time (send → response), an admitted stream's first content token;
// from the gateway's /metrics the sheds decided at arrival; from each replica's /_mock/state its preemptions.
// Pass rule: every answer 200 or 429 server_overloaded with Retry-After; 90 % of the 429s within 100 ms; at
// least 6 admitted, 90 % of them with a first token within 600 ms; no preemption.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { spawnMockReplica, type SpawnedReplica } from '../../test/helpers/mock-replicas.ts';
import { startGatewayProcess } from '../harness/gateway-process.ts';
import type { BenchScenario } from '../types.ts';

const MODEL = 'llama-3.1-8b-instruct';
const API_KEY = 'sk-overload-bench';
const repoRoot = fileURLToPath(new URL('../../', import.meta.url));

interface Answer {
  status: number;
  retryAfter: string | null;
  code: string | null;
  /** Send → response headers (a 429's answer time). */
  answerMs: number;
  /** Send → first content delta; NaN when none. */
  firstTokenMs: number;
}

/** ≈ 1,500 Llama 3 tokens, distinct from the first block on. */
function prompt(i: number): string {
  const words = ['north', 'quarter', 'margin', 'river', 'ledger', 'harvest', 'signal', 'copper', 'engine', 'meadow'];
  const parts = [`Request ${i}: summarise these notes.`];
  for (let k = 0; k < 700; k++) parts.push(`${words[(i * 7 + k * 3) % 10]}-${(i * 131 + k) % 997}`);
  return parts.join(' ');
}

async function stream(url: string, i: number, maxTokens: number): Promise<Answer> {
  const sent = performance.now();
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, stream: true, max_tokens: maxTokens, ignore_eos: true, messages: [{ role: 'user', content: prompt(i) }] }),
  });
  const answerMs = performance.now() - sent;
  if (res.status !== 200 || res.body === null) {
    const text = await res.text();
    let code: string | null = null;
    try {
      code = (JSON.parse(text) as { error?: { code?: string } }).error?.code ?? null;
    } catch {
      code = null;
    }
    return { status: res.status, retryAfter: res.headers.get('retry-after'), code, answerMs, firstTokenMs: Number.NaN };
  }
  let firstTokenMs = Number.NaN;
  const decoder = new TextDecoder();
  for await (const chunk of res.body) {
    if (Number.isNaN(firstTokenMs) && /"content":"[^"]/.test(decoder.decode(chunk as Uint8Array, { stream: true }))) firstTokenMs = performance.now() - sent;
  }
  return { status: 200, retryAfter: null, code: null, answerMs, firstTokenMs };
}

function quantile(xs: number[], q: number): number {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))]!;
}

const overloadDemo: BenchScenario = async (argv) => {
  const { values } = parseArgs({
    args: argv,
    options: {
      replicas: { type: 'string', default: '4' }, streams: { type: 'string', default: '60' },
      'max-tokens': { type: 'string', default: '32' }, policy: { type: 'string', default: 'kv-aware' },
    },
  });
  const nReplicas = Number(values.replicas);
  const nStreams = Number(values.streams);
  const maxTokens = Number(values['max-tokens']);
  const logDir = mkdtempSync(join(tmpdir(), 'overload-demo-'));
  const replicas: SpawnedReplica[] = [];
  let gateway: Awaited<ReturnType<typeof startGatewayProcess>> | null = null;
  try {
    for (let i = 0; i < nReplicas; i++) {
      replicas.push(await spawnMockReplica(['--profile', 'llama-8b-a100', '--model', MODEL]));
    }
    gateway = await startGatewayProcess({
      repoRoot, logDir, model: MODEL, apiKey: API_KEY, policy: values.policy,
      replicas: replicas.map((r, i) => ({ id: `8b-${i + 1}`, url: r.url })),
      configOverrides: { registry: { scrape_interval_ms: 100 } },
    });
    // One request first, so that the tokenizer and the connections are warm (the demo has been up a while).
    await stream(gateway.url, -1, 4);
    const answers = await Promise.all(Array.from({ length: nStreams }, (_, i) => stream(gateway!.url, i, maxTokens)));
    const metrics = await (await fetch(`${gateway.url}/metrics`)).text();
    const shedAt = (when: string): number => Number(new RegExp(`^gateway_admission_sheds_total\\{pool="bench",when="${when}"\\} (\\d+)`, 'm').exec(metrics)?.[1] ?? 0);
    let preemptions = 0;
    for (const r of replicas) preemptions += ((await (await fetch(`${r.url}/_mock/state`)).json()) as { preemptions: number }).preemptions;

    const admitted = answers.filter((a) => a.status === 200);
    const shed = answers.filter((a) => a.status === 429);
    const other = answers.filter((a) => a.status !== 200 && a.status !== 429);
    const shedOk = shed.filter((a) => a.code === 'server_overloaded' && /^[1-9][0-9]*$/.test(a.retryAfter ?? ''));
    const shedFast = shed.filter((a) => a.answerMs <= 100).length;
    const firstTokens = admitted.map((a) => a.firstTokenMs);
    const onTime = firstTokens.filter((ms) => ms <= 600).length;
    const checks: Array<[string, boolean]> = [
      ['every answer 200 or 429 server_overloaded with Retry-After', other.length === 0 && shedOk.length === shed.length],
      ['90 % of the 429s within 100 ms', shedFast >= 0.9 * shed.length],
      ['at least 6 admitted', admitted.length >= 6],
      ['90 % of the admitted with a first token within 600 ms', onTime >= 0.9 * admitted.length],
      ['no preemption', preemptions === 0],
    ];
    const failedChecks = checks.filter(([, ok]) => !ok).map(([name]) => name);
    return {
      title: `${nStreams} concurrent distinct ~1,500-token streams to ${nReplicas} real-time 8B mock replicas (${values.policy}, admission in GPU time)`,
      columns: ['figure', 'value'],
      rows: [
        ['admitted (200)', admitted.length],
        ['shed (429)', shed.length],
        ['other statuses', other.length],
        ['sheds decided at arrival (gateway_admission_sheds_total)', shedAt('arrival')],
        ['sheds after queueing', shedAt('queued')],
        ['429 answer ms p50 / p90 / max', `${quantile(shed.map((a) => a.answerMs), 0.5).toFixed(1)} / ${quantile(shed.map((a) => a.answerMs), 0.9).toFixed(1)} / ${quantile(shed.map((a) => a.answerMs), 1).toFixed(1)}`],
        ['429 within 100 ms', `${shedFast} of ${shed.length}`],
        ['Retry-After values (s)', [...new Set(shed.map((a) => a.retryAfter))].join(', ')],
        ['admitted first token ms p50 / p90 / max', `${quantile(firstTokens, 0.5).toFixed(0)} / ${quantile(firstTokens, 0.9).toFixed(0)} / ${quantile(firstTokens, 1).toFixed(0)}`],
        ['admitted first token within 600 ms', `${onTime} of ${admitted.length}`],
        ['preemptions (all replicas)', preemptions],
        ...checks.map(([name, ok]): [string, string] => [`check: ${name}`, ok ? 'met' : 'MISSED']),
      ],
      notes: [
        `Command: npm run bench -- overload-demo --replicas ${nReplicas} --streams ${nStreams} --max-tokens ${maxTokens} --policy ${values.policy}`,
        'Times are wall-clock at the client on this machine: on a machine shared with other jobs the gateway\'s tokenizing and the replicas\' event loops add to them.',
      ],
      extra: { answers },
      ...(failedChecks.length > 0 ? { failed: failedChecks.join('; ') } : {}),
    };
  } finally {
    await gateway?.stop();
    await Promise.all(replicas.map((r) => r.kill()));
  }
};

export default overloadDemo;
