// `npm run bench -- overload-demo [--streams 60] [--max-tokens 32] [--warmup 1] [--connections fresh|pooled]
//   [--client raw|node-http] [--config config/demo.yaml]`
// Question: on the demo fleet under a burst it cannot serve, does the gateway admit only what it can start
// within the TTFT SLO and answer the rest at once? Setup: what `npm run demo` starts, from the same file: every
// mock replica of config/demo.yaml (its own process, the pool's profile, real time) and the gateway on that
// config, each on a free loopback port instead of the file's (another demo may hold 8080 and 81xx). Load: the
// first demo tenant's key (premium), `--streams` concurrent streaming chat requests to the 8B pool, each a
// distinct ~1,500-token prompt (Llama 3 tokens, chat template included), `max_tokens` fixed with ignore_eos,
// each on its own connection (60 independent clients): opened with the request (fresh, the default) or before
// the burst (pooled, as an SDK's keep-alive pool holds one). Before the burst, `--warmup` requests one after another
// (distinct prompts of the same kind, `max_tokens` 4): 1 warms a connection and the tokenizer; more stand for a
// gateway that has served a while (its request path optimised by V8, not only the tokenizer). Measured at the client: each answer's status and
// Retry-After, a 429's answer time, an admitted stream's first content token; from the
// gateway's /metrics the sheds decided at arrival and its TTFT prediction error; from each replica's
// /_mock/state its preemptions.
// A 429's answer time runs from its request on the wire (every byte handed to the socket) to the response
// head. From the client's call it also counts this one process opening 60 connections and writing 60 bodies
// one after another on the two cores the gateway uses: 60 independent clients would not queue behind each
// other. Both are reported. `--client raw` (the default) sends each request's prebuilt bytes in one write on
// a node:net socket and reads the answer from raw Buffers (../load/one-shot-http.ts): ~0.6 ms of this
// process's CPU per request against ~1.1 ms through node:http (`--client node-http`), CPU the client
// would otherwise take from the gateway it measures.
// Profiles: OVERLOAD_DEMO_CPU_PROF=<dir> writes one V8 .cpuprofile per gateway thread (wall-time samples);
// OVERLOAD_DEMO_PERF=<file> records `perf record -g` of the gateway (CPU-time samples, every thread, JIT frames
// named) from 1.5 s before the burst to its last answer (../harness/perf-record.ts).
// Pass rule: every answer 200 or 429 server_overloaded with Retry-After; 90 % of the 429s within 100 ms of
// the request on the wire; at least 6 admitted, 90 % of them with a first token within 600 ms (from the
// client's call); no preemption.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { Agent, request, type IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { loadConfigFile } from '../../src/config/load.ts';
import { startFleet, type Fleet } from '../../test/mock-replica/fleet.ts';
import { freePort } from '../harness/processes.ts';
import { cpuMicros } from '../load/proc-cpu.ts';
import { oneShot, openSocket, requestBytes } from '../load/one-shot-http.ts';
import { startGatewayFromFile, type GatewayProcess } from '../harness/gateway-process.ts';
import { PERF_NODE_ARGS, startPerfRecord, type PerfRecording } from '../harness/perf-record.ts';
import type { BenchScenario } from '../types.ts';

const MODEL = 'llama-3.1-8b-instruct';
const POOL = '8b';
/** config/demo.yaml's tenant alpha (premium: the 400 ms TTFT tier). */
const API_KEY = 'sk-demo-alpha';
const repoRoot = fileURLToPath(new URL('../../', import.meta.url));

interface Answer {
  status: number;
  retryAfter: string | null;
  code: string | null;
  /** The client's call → response headers. */
  answerMs: number;
  /** Every byte of the request handed to the socket ('finish') → response headers (a 429's answer time). */
  wireAnswerMs: number;
  /** The client's call → first content delta; NaN when none. */
  firstTokenMs: number;
  /** When the answer's head came (performance.now()). */
  headAt: number;
}

/**
 * ≈ 1,500 Llama 3 tokens with the chat template (each `word-NNN` is ~3 tokens; the template's header adds ~30),
 * distinct after the template's first two blocks, which every chat prompt shares.
 */
function prompt(i: number): string {
  const words = ['north', 'quarter', 'margin', 'river', 'ledger', 'harvest', 'signal', 'copper', 'engine', 'meadow'];
  const parts = [`Request ${i}: summarise these notes.`];
  for (let k = 0; k < 470; k++) parts.push(`${words[(i * 7 + k * 3) % 10]}-${(i * 131 + k) % 997}`);
  return parts.join(' ');
}

/** One POST on its own connection; resolves at the response head with the time since the call. */
function post(url: string, body: string, agent: Agent | false): Promise<{ res: IncomingMessage; answerMs: number; wireAnswerMs: number; sent: number }> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const sent = performance.now();
    let written = Number.NaN;
    const req = request({
      host: u.hostname, port: u.port, path: u.pathname, method: 'POST', agent,
      headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
    }, (res) => {
      const now = performance.now();
      resolve({ res, answerMs: now - sent, wireAnswerMs: now - written, sent });
    });
    req.once('finish', () => {
      written = performance.now();
    });
    req.once('error', reject);
    req.end(body);
  });
}

/** Opens `n` connections through `agent` (n GET /healthz at once, each on its own socket), left idle in its pool. */
async function openConnections(url: string, agent: Agent, n: number): Promise<void> {
  await Promise.all(Array.from({ length: n }, () => new Promise<void>((resolve, reject) => {
    const req = request(`${url}/healthz`, { agent }, (res) => {
      res.resume();
      res.on('end', resolve);
    });
    req.once('error', reject);
    req.end();
  })));
  const idle = Object.values(agent.freeSockets).reduce((k, list) => k + (list?.length ?? 0), 0);
  if (idle !== n) throw new Error(`${idle} of ${n} connections open before the burst`);
}

/** The request bodies are built before the burst, so that the clock of each starts at its send. */
function body(i: number, maxTokens: number): string {
  return JSON.stringify({ model: MODEL, stream: true, max_tokens: maxTokens, ignore_eos: true, messages: [{ role: 'user', content: prompt(i) }] });
}

async function stream(url: string, payload: string, agent: Agent | false = false): Promise<Answer> {
  const { res, answerMs, wireAnswerMs, sent } = await post(`${url}/v1/chat/completions`, payload, agent);
  const retryAfter = res.headers['retry-after'];
  if (res.statusCode !== 200) {
    let text = '';
    for await (const chunk of res) text += (chunk as Buffer).toString();
    return { status: res.statusCode ?? 0, retryAfter: typeof retryAfter === 'string' ? retryAfter : null, code: errorCode(text), answerMs, wireAnswerMs, firstTokenMs: Number.NaN, headAt: sent + answerMs };
  }
  let firstTokenMs = Number.NaN;
  for await (const chunk of res) {
    if (Number.isNaN(firstTokenMs) && FIRST_CONTENT.test((chunk as Buffer).toString())) firstTokenMs = performance.now() - sent;
  }
  return { status: 200, retryAfter: null, code: null, answerMs, wireAnswerMs, firstTokenMs, headAt: sent + answerMs };
}

/** The same request through one-shot-http.ts: prebuilt bytes, one write, the response read from raw Buffers. */
async function rawStream(port: number, bytes: Buffer, socket?: Socket): Promise<Answer> {
  const t = await oneShot(port, bytes, FIRST_CONTENT, socket);
  const answerMs = t.headAt - t.calledAt;
  return {
    status: t.status, retryAfter: t.headers.get('retry-after') ?? null, code: t.status === 200 ? null : errorCode(t.body),
    answerMs, wireAnswerMs: t.headAt - t.writtenAt, firstTokenMs: t.matchAt - t.calledAt, headAt: t.headAt,
  };
}

/** A stream's first content delta (not the role-only first frame). */
const FIRST_CONTENT = /"content":"[^"]/;

function errorCode(text: string): string | null {
  try {
    return (JSON.parse(text) as { error?: { code?: string } }).error?.code ?? null;
  } catch {
    return null;
  }
}

/**
 * The demo config with every replica and the gateway on a free loopback port; written next to the logs.
 * Returns the file's path.
 */
async function demoConfigOnFreePorts(source: string, logDir: string): Promise<string> {
  let text = readFileSync(source, 'utf8');
  const urls = [...new Set(text.match(/http:\/\/127\.0\.0\.1:\d+/g) ?? [])];
  for (const u of urls) text = text.replaceAll(`${u}"`, `http://127.0.0.1:${await freePort()}"`);
  const path = join(logDir, 'demo.yaml');
  writeFileSync(path, text);
  return path;
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
      streams: { type: 'string', default: '60' }, 'max-tokens': { type: 'string', default: '32' }, warmup: { type: 'string', default: '1' },
      connections: { type: 'string', default: 'fresh' }, client: { type: 'string', default: 'raw' },
      config: { type: 'string', default: 'config/demo.yaml' },
    },
  });
  const nStreams = Number(values.streams);
  const maxTokens = Number(values['max-tokens']);
  const warmup = Number(values.warmup);
  if (values.connections !== 'fresh' && values.connections !== 'pooled') throw new Error('--connections is fresh or pooled');
  if (values.client !== 'raw' && values.client !== 'node-http') throw new Error('--client is raw or node-http');
  const raw = values.client === 'raw';
  const pooled = values.connections === 'pooled';
  // pooled: every client's connection is open before the burst, as an SDK's keep-alive pool holds it.
  const agent = pooled && !raw ? new Agent({ keepAlive: true, maxSockets: nStreams }) : false;
  let sockets: Socket[] = [];
  const logDir = mkdtempSync(join(tmpdir(), 'overload-demo-'));
  // A relative --config is the repository's (config/demo.yaml), an absolute one taken as it is.
  const configPath = await demoConfigOnFreePorts(resolve(repoRoot, values.config), logDir);
  const cfg = loadConfigFile(configPath, {});
  const pool = cfg.pools.find((p) => p.id === POOL);
  if (pool === undefined) throw new Error(`${values.config} has no pool ${POOL}`);
  let fleet: Fleet | null = null;
  let gateway: GatewayProcess | null = null;
  const perfFile = process.env.OVERLOAD_DEMO_PERF;
  let perf: PerfRecording | null = null;
  try {
    fleet = await startFleet(cfg);
    gateway = await startGatewayFromFile({
      repoRoot, logDir, cpuProfDir: process.env.OVERLOAD_DEMO_CPU_PROF, nodeArgs: perfFile !== undefined ? PERF_NODE_ARGS : [],
    }, configPath);
    // Requests first, so that the tokenizer and a connection are warm (the demo has been up a while); distinct
    // from the burst's (negative indices), one at a time, so none is shed.
    const gw = new URL(gateway.url);
    const port = Number(gw.port);
    const headers = { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' };
    const bytesOf = (payload: string): Buffer => requestBytes(gw.host, '/v1/chat/completions', headers, payload);
    for (let w = 1; w <= warmup; w++) await (raw ? rawStream(port, bytesOf(body(-w, 4))) : stream(gateway.url, body(-w, 4)));
    if (agent !== false) await openConnections(gateway.url, agent, nStreams);
    if (raw && pooled) sockets = await Promise.all(Array.from({ length: nStreams }, () => openSocket(port)));
    const payloads = Array.from({ length: nStreams }, (_, i) => body(i, maxTokens));
    const rawPayloads = raw ? payloads.map(bytesOf) : [];
    const eightB = fleet.replicas.filter((x) => pool.replicas.some((p) => p.id === x.id));
    // CPU while the burst is answered (until the last 429's head): what the 429s cost, apart from the wall
    // clock of a machine shared with other jobs. One /proc read of the gateway per 429 (10 ms ticks).
    if (perfFile !== undefined) perf = await startPerfRecord(gateway.proc.pid, resolve(perfFile));
    const load1 = loadavg()[0]!;
    const gatewayPid = [gateway.proc.pid];
    const gatewayCpu0 = cpuMicros(gatewayPid, false);
    const clientCpu0 = process.cpuUsage();
    let lastHeadAt = 0;
    let cpuAtLastShed: [number, number] = [0, 0];
    const burstAt = performance.now();
    const answers = await Promise.all(payloads.map((p, i) => (raw ? rawStream(port, rawPayloads[i]!, sockets[i]) : stream(gateway!.url, p, agent)).then((a) => {
      if (a.headAt > lastHeadAt && a.status !== 200) {
        lastHeadAt = a.headAt;
        const c = process.cpuUsage(clientCpu0);
        cpuAtLastShed = [cpuMicros(gatewayPid, false) - gatewayCpu0, c.user + c.system];
      }
      return a;
    })));
    await perf?.stop();
    perf = null;
    const metrics = await (await fetch(`${gateway.url}/metrics`)).text();
    const shedAt = (when: string): number => Number(new RegExp(`^gateway_admission_sheds_total\\{pool="${POOL}",when="${when}"\\} (\\d+)`, 'm').exec(metrics)?.[1] ?? 0);
    const errSum = Number(new RegExp(`^gateway_ttft_prediction_error_ratio_sum\\{pool="${POOL}"\\} ([0-9.e+-]+)`, 'm').exec(metrics)?.[1] ?? Number.NaN);
    const errCount = Number(new RegExp(`^gateway_ttft_prediction_error_ratio_count\\{pool="${POOL}"\\} ([0-9.e+-]+)`, 'm').exec(metrics)?.[1] ?? Number.NaN);
    let preemptions = 0;
    for (const r of eightB) {
      preemptions += ((await (await fetch(`${r.url}/_mock/state`)).json()) as { preemptions: number }).preemptions;
    }

    const admitted = answers.filter((a) => a.status === 200);
    const shed = answers.filter((a) => a.status === 429);
    const other = answers.filter((a) => a.status !== 200 && a.status !== 429);
    const shedOk = shed.filter((a) => a.code === 'server_overloaded' && /^[1-9][0-9]*$/.test(a.retryAfter ?? ''));
    const shedFast = shed.filter((a) => a.wireAnswerMs <= 100).length;
    const firstTokens = admitted.map((a) => a.firstTokenMs);
    const onTime = firstTokens.filter((ms) => ms <= 600).length;
    const slo = cfg.admission.ttft_ms_by_tier.premium;
    const checks: Array<[string, boolean]> = [
      ['every answer 200 or 429 server_overloaded with Retry-After', other.length === 0 && shedOk.length === shed.length],
      ['90 % of the 429s within 100 ms of the request on the wire', shedFast >= 0.9 * shed.length],
      ['at least 6 admitted', admitted.length >= 6],
      ['90 % of the admitted with a first token within 600 ms', onTime >= 0.9 * admitted.length],
      ['no preemption', preemptions === 0],
    ];
    const failedChecks = checks.filter(([, ok]) => !ok).map(([name]) => name);
    return {
      title: `${nStreams} concurrent distinct ~1,500-token streams to the demo fleet's ${pool.replicas.length} real-time 8B mock replicas (${values.config}: ${cfg.routing.policy}, admission in GPU time)`,
      columns: ['figure', 'value'],
      rows: [
        ['admitted (200)', admitted.length],
        ['shed (429)', shed.length],
        ['other statuses', other.length],
        ['sheds decided at arrival (gateway_admission_sheds_total)', shedAt('arrival')],
        ['sheds after queueing', shedAt('queued')],
        ['429 answer ms from the request on the wire, p50 / p90 / max', `${quantile(shed.map((a) => a.wireAnswerMs), 0.5).toFixed(1)} / ${quantile(shed.map((a) => a.wireAnswerMs), 0.9).toFixed(1)} / ${quantile(shed.map((a) => a.wireAnswerMs), 1).toFixed(1)}`],
        ['429 within 100 ms of the request on the wire', `${shedFast} of ${shed.length}`],
        ['429 answer ms from the client\'s call, p50 / p90 / max', `${quantile(shed.map((a) => a.answerMs), 0.5).toFixed(1)} / ${quantile(shed.map((a) => a.answerMs), 0.9).toFixed(1)} / ${quantile(shed.map((a) => a.answerMs), 1).toFixed(1)}`],
        ['429 within 100 ms of the client\'s call', `${shed.filter((a) => a.answerMs <= 100).length} of ${shed.length}`],
        ['until the last 429 (ms): wall / CPU of the gateway / of this client', `${(lastHeadAt - burstAt).toFixed(0)} / ${(cpuAtLastShed[0] / 1000).toFixed(0)} / ${(cpuAtLastShed[1] / 1000).toFixed(0)}`],
        ['load average (1 min) before the burst, on 2 cores', load1.toFixed(1)],
        ['Retry-After values (s)', [...new Set(shed.map((a) => a.retryAfter))].join(', ')],
        ['admitted first token ms p50 / p90 / max', `${quantile(firstTokens, 0.5).toFixed(0)} / ${quantile(firstTokens, 0.9).toFixed(0)} / ${quantile(firstTokens, 1).toFixed(0)}`],
        ['admitted first token within 600 ms', `${onTime} of ${admitted.length}`],
        [`admitted first token within the tier's TTFT (${slo} ms): met its SLO`, `${firstTokens.filter((ms) => ms <= slo).length} of ${admitted.length}`],
        ['preemptions (8B replicas)', preemptions],
        ['TTFT prediction error (gateway_ttft_prediction_error_ratio): mean over first tokens', `${(errSum / errCount).toFixed(3)} over ${errCount}`],
        ...checks.map(([name, ok]): [string, string] => [`check: ${name}`, ok ? 'met' : 'MISSED']),
      ],
      notes: [
        `Command: npm run bench -- overload-demo --streams ${nStreams} --max-tokens ${maxTokens} --warmup ${warmup} --connections ${values.connections} --client ${values.client} --config ${values.config}`,
        'Times are wall-clock at the client on this machine: on a machine shared with other jobs the gateway\'s tokenizing and the replicas\' event loops add to them.',
        ...(perfFile !== undefined ? [`perf profile of the gateway over the burst: ${resolve(perfFile)} (main thread: perf report -i FILE --tid ${gateway.proc.pid})`] : []),
      ],
      extra: { answers },
      ...(failedChecks.length > 0 ? { failed: failedChecks.join('; ') } : {}),
    };
  } finally {
    await perf?.stop();
    if (agent !== false) agent.destroy();
    for (const so of sockets) so.destroy();
    await gateway?.stop();
    await fleet?.stop();
  }
};

export default overloadDemo;
