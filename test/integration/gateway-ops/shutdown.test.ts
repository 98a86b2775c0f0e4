// Graceful shutdown of the real gateway process: `node --import tsx src/main.ts --config FILE` with a JSONL
// usage sink from USAGE_JSONL, in front of two mock replicas running in this test process. Several streams
// are in flight (the replicas are slowed so each takes about a second) when SIGTERM arrives: the port stops
// accepting, a request on an already open connection is answered 503 shutting_down (and, its key being valid,
// leaves a usage record), /readyz turns 503, the in-flight streams finish cleanly with [DONE], the process exits
// 0 and the JSONL file holds exactly one usage record per request.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startMockReplica, type MockReplica } from '../../helpers/mock-replicas.ts';
import { TEST_INDEX_SIZES, waitFor } from '../../helpers/start-gateway.ts';
import { openStream, type OpenStream } from '../mock-replica/http-client.ts';
import type { UsageRecord } from '../../../src/usage/usage-record.ts';
import { nodeEntry } from '../../helpers/node-entry.ts';

const KEY = 'sk-shutdown-test';
const MODEL = 'llama-3.1-8b-instruct';
const STREAMS = 4;
const TOKENS_PER_STREAM = 10;
const DELAY_PER_TOKEN_MS = 100; // ~1 s per stream
const MAIN = nodeEntry('../../../src/main', import.meta.url);

const dir = mkdtempSync(join(tmpdir(), 'expediter-shutdown-'));
const replicas: MockReplica[] = [];
const children: ChildProcess[] = [];

after(async () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  await Promise.all(replicas.map((r) => r.close()));
  rmSync(dir, { recursive: true, force: true });
});

/** GET over a given agent, resolving with status and body (no fetch: it hides which socket is used). */
function get(url: string, agent: Agent): Promise<{ status: number; body: string; reusedSocket: boolean }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { agent }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, reusedSocket: req.reusedSocket }));
    });
    req.on('error', reject);
    req.end();
  });
}

function post(url: string, agent: Agent, body: unknown, headers: Record<string, string>): Promise<{ status: number; body: string; headers: Record<string, unknown>; reusedSocket: boolean }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { agent, method: 'POST', headers: { 'content-type': 'application/json', ...headers } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text, headers: res.headers, reusedSocket: req.reusedSocket }));
    });
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

/** Resolves with the error code of a fresh TCP connection attempt, or 'connected'. */
function tryConnect(port: number): Promise<string> {
  return new Promise((resolve) => {
    const sock = connect(port, '127.0.0.1');
    sock.once('connect', () => {
      sock.destroy();
      resolve('connected');
    });
    sock.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
  });
}

interface ChildGateway {
  proc: ChildProcess;
  port: number;
  url: string;
  usagePath: string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  output(): { stdout: string; stderr: string };
}

/** Starts `src/main.ts` as a child process in front of `replicas`, with its own config and USAGE_JSONL file. */
async function startChildGateway(name: string, graceMs: number): Promise<ChildGateway> {
  const usagePath = join(dir, `${name}.jsonl`);
  const configPath = join(dir, `${name}.yaml`);
  // JSON is YAML: the loader reads it like any YAML file.
  writeFileSync(configPath, JSON.stringify({
    server: { host: '127.0.0.1', port: 0, shutdown_grace_ms: graceMs },
    // short prompts are tokenized inline anyway; no worker pool spares the child ~2 s of startup
    tokenizer: { threads: 0 },
    routing: TEST_INDEX_SIZES,
    registry: { scrape_interval_ms: 50, scrape_timeout_ms: 2000, down_after_failures: 2 },
    pools: [{ id: '8b', model: MODEL, aliases: ['gpt-fast'], max_context_tokens: 2048, default_max_tokens: 64,
      replicas: replicas.map((r, i) => ({ id: `8b-${i + 1}`, url: r.url })) }],
    tenants: [{ name: 'alpha', api_keys: [{ sha256: createHash('sha256').update(KEY).digest('hex') }], tokens_per_second: 1_000_000, burst_tokens: 10_000_000, max_inflight: 256 }],
  }, null, 2));
  const proc = spawn(process.execPath, [...MAIN, '--config', configPath], {
    cwd: new URL('../../../', import.meta.url).pathname,
    env: { ...process.env, USAGE_JSONL: usagePath, LOG_LEVEL: 'info', PORT: '', GATEWAY_CONFIG: '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(proc);
  let stdout = '';
  let stderr = '';
  proc.stdout!.setEncoding('utf8').on('data', (c: string) => (stdout += c));
  proc.stderr!.setEncoding('utf8').on('data', (c: string) => (stderr += c));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => proc.once('exit', (code, signal) => resolve({ code, signal })));
  const port = await waitFor(() => {
    for (const line of stdout.split('\n')) {
      if (!line.includes('gateway listening')) continue;
      const p = (JSON.parse(line) as { port?: number }).port;
      if (p) return p;
    }
    if (proc.exitCode !== null) throw new Error(`gateway exited early (${proc.exitCode}): ${stderr}`);
    return 0;
  }, 120_000, 50).catch((err: Error) => {
    throw new Error(`${err.message}; gateway stdout: ${stdout.slice(-1000)} stderr: ${stderr.slice(-1000)}`);
  });
  const url = `http://127.0.0.1:${port}`;
  await waitFor(async () => (await fetch(`${url}/readyz`)).status === 200, 60_000, 50);
  return { proc, port, url, usagePath, exited, output: () => ({ stdout, stderr }) };
}

async function startReplicas(delayPerTokenMs: number): Promise<void> {
  if (replicas.length === 0) for (let i = 0; i < 2; i++) replicas.push(await startMockReplica({ profile: 'tiny', model: MODEL }));
  for (const r of replicas) {
    const res = await fetch(`${r.url}/_mock/faults`, { method: 'POST', body: JSON.stringify({ mode: 'slow', delay_ms: delayPerTokenMs }) });
    assert.equal(res.status, 200);
  }
}

const readUsage = (path: string): UsageRecord[] => (existsSync(path) ? readFileSync(path, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as UsageRecord) : []);

test('SIGTERM drains in-flight streams to [DONE], refuses new work, exits 0 and loses no usage record', async () => {
  await startReplicas(DELAY_PER_TOKEN_MS);
  const gw = await startChildGateway('drain', 8000);
  const { proc, port, url, usagePath, exited } = gw;

  // A kept-alive connection opened before the signal: the only way to reach a gateway whose port is closed.
  const keepAlive = new Agent({ keepAlive: true, maxSockets: 1 });
  assert.equal((await get(`${url}/healthz`, keepAlive)).status, 200);

  const auth = { authorization: `Bearer ${KEY}` };
  const streams: OpenStream[] = [];
  for (let i = 0; i < STREAMS; i++) {
    streams.push(openStream(url, '/v1/chat/completions', { model: 'gpt-fast', messages: [{ role: 'user', content: `story ${i}` }], max_tokens: TOKENS_PER_STREAM, ignore_eos: true, stream: true },
      { ...auth, 'x-request-id': `drain-${i}` }));
  }
  await Promise.all(streams.map((s) => s.waitFrames(2))); // every stream is past its first token
  const signalledAt = performance.now();
  proc.kill('SIGTERM');

  // New connections are refused once the listen socket is closed.
  assert.equal(await waitFor(async () => ((await tryConnect(port)) === 'ECONNREFUSED' ? 'ECONNREFUSED' : ''), 2000, 10), 'ECONNREFUSED');

  // On the open connection: not ready, and new completions are turned away with 503 + Retry-After.
  const ready = await get(`${url}/readyz`, keepAlive);
  assert.equal(ready.reusedSocket, true, 'the kept-alive socket was used');
  assert.equal(ready.status, 503, '/readyz turns 503 while draining');
  const refused = await post(`${url}/v1/chat/completions`, keepAlive, { model: 'gpt-fast', messages: [{ role: 'user', content: 'late' }], max_tokens: 2 }, { ...auth, 'x-request-id': 'too-late' });
  assert.equal(refused.status, 503);
  assert.equal((JSON.parse(refused.body) as { error: { code: string } }).error.code, 'shutting_down');
  assert.ok(Number(refused.headers['retry-after']) >= 1);
  const stillStreaming = streams.filter((s) => !s.text().endsWith('data: [DONE]\n\n')).length;
  assert.ok(stillStreaming > 0, 'the checks above ran while streams were still in flight');
  keepAlive.destroy();

  for (const [i, s] of streams.entries()) {
    const { outcome, text } = await s.done;
    assert.equal(outcome, 'end', `stream ${i} ended cleanly`);
    assert.equal((await s.head).statusCode, 200);
    assert.ok(text.endsWith('data: [DONE]\n\n'), `stream ${i} finished with [DONE]: ${text.slice(-200)}`);
    assert.ok(!text.includes('"error"'), `stream ${i} has no error event`);
    const content = s.frames().filter((f) => f.includes('"content"') && !f.includes('"role"'));
    assert.equal(content.length, TOKENS_PER_STREAM, `stream ${i} got every token`);
  }

  const { code, signal } = await exited;
  assert.equal(signal, null);
  assert.equal(code, 0, `exit code (stderr: ${gw.output().stderr.slice(-500)})`);
  const drainMs = performance.now() - signalledAt;
  assert.ok(drainMs < 8000, `drained in ${drainMs.toFixed(0)} ms, within the grace period`);

  assert.ok(existsSync(usagePath));
  const records = readUsage(usagePath);
  const ids = records.map((r) => r.request_id).sort();
  assert.deepEqual(ids.filter((id) => id.startsWith('drain-')), streams.map((_, i) => `drain-${i}`), 'one record per drained stream, none lost or doubled');
  for (const r of records.filter((x) => x.request_id.startsWith('drain-'))) {
    assert.equal(r.status, 200);
    assert.equal(r.cancelled, false);
    assert.equal(r.output_tokens, TOKENS_PER_STREAM);
    assert.equal(r.finish_reason, 'length');
    assert.equal(r.tenant, 'alpha');
  }
  // The request refused during the drain carried a valid key: it is authenticated before it is refused, so it
  // leaves its usage record (503 shutting_down, nothing charged), like any other refusal.
  const late = records.filter((r) => r.request_id === 'too-late');
  assert.equal(late.length, 1, 'one usage record for the refused request');
  assert.equal(late[0]!.status, 503);
  assert.equal(late[0]!.tenant, 'alpha');
  assert.equal(late[0]!.output_tokens, 0);
  assert.equal(late[0]!.replica, null);
  assert.match(gw.output().stdout, /draining/, 'the gateway logged its drain');
});

test('streams still running when the grace period ends get one shutting_down event, and are logged and recorded as drained (503)', async () => {
  await startReplicas(100); // 30 tokens at 100 ms: ~3 s, far past a 400 ms grace
  const gw = await startChildGateway('deadline', 400);
  const streams = [0, 1].map((i) => openStream(gw.url, '/v1/chat/completions', { model: 'gpt-fast', messages: [{ role: 'user', content: `long ${i}` }], max_tokens: 30, ignore_eos: true, stream: true },
    { authorization: `Bearer ${KEY}`, 'x-request-id': `cut-${i}` }));
  await Promise.all(streams.map((s) => s.waitFrames(2)));
  gw.proc.kill('SIGTERM');
  for (const [i, s] of streams.entries()) {
    const { text } = await s.done;
    const frames = text.split('\n\n').filter(Boolean);
    assert.ok(!text.includes('[DONE]'), `stream ${i}: a cut stream is never disguised as complete`);
    assert.ok(frames.at(-1)?.startsWith('data: {"error"'), `stream ${i} ends with an error event: ${frames.at(-1)}`);
    assert.equal(frames.filter((f) => f.startsWith('data: {"error"')).length, 1);
    assert.match(frames.at(-1)!, /"code":"shutting_down"/);
  }
  const { code } = await gw.exited;
  assert.equal(code, 0);
  const recs = readUsage(gw.usagePath).filter((r) => r.request_id.startsWith('cut-'));
  assert.deepEqual(recs.map((r) => r.request_id).sort(), ['cut-0', 'cut-1'], 'one record per cut stream');
  for (const r of recs) {
    assert.ok(r.output_tokens >= 1 && r.output_tokens < 30, `output tokens relayed before the cut: ${r.output_tokens}`);
    assert.equal(r.finish_reason, null);
    assert.equal(r.status, 503, 'recorded as drained by the shutdown');
    assert.equal(r.cancelled, false, 'the client did not leave');
  }
  // Logged as the gateway's drain, not as a replica failure.
  const lines = gw.output().stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);
  const requestLines = lines.filter((l) => l.msg === 'request' && String(l.request_id).startsWith('cut-'));
  assert.deepEqual(requestLines.map((l) => [l.status, l.code]), [[503, 'shutting_down'], [503, 'shutting_down']]);
  assert.ok(!gw.output().stdout.includes('upstream_error'), 'no upstream_error anywhere in the log');
});
