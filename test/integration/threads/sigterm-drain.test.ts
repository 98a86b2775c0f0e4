// SIGTERM with server.threads: 2: the real gateway process (`node --import tsx src/main.ts`) holds slowed
// streams on both acceptor threads when the signal arrives. Every thread stops accepting, every stream on every
// thread finishes with [DONE], the process exits 0, and the usage file (written by the one main-thread sink for
// records from both threads) holds exactly one whole record per stream.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startMockReplica, type MockReplica } from '../../helpers/mock-replicas.ts';
import { TEST_INDEX_SIZES, waitFor } from '../../helpers/start-gateway.ts';
import { openStream, setFault } from '../mock-replica/http-client.ts';
import type { UsageRecord } from '../../../src/usage/usage-record.ts';
import { nodeEntry } from '../../helpers/node-entry.ts';

const KEY = 'sk-threads-drain';
const MODEL = 'llama-3.1-8b-instruct';
const STREAMS = 16; // all on one thread of two: odds 2^-15
const TOKENS = 8;
const MAIN = nodeEntry('../../../src/main', import.meta.url);

const dir = mkdtempSync(join(tmpdir(), 'expediter-threads-drain-'));
const replicas: MockReplica[] = [];
let proc: ChildProcess | null = null;

after(async () => {
  if (proc && proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
  await Promise.all(replicas.map((r) => r.close()));
  rmSync(dir, { recursive: true, force: true });
});

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

test('SIGTERM drains the streams of every acceptor thread and loses no usage record', async () => {
  for (let i = 0; i < 2; i++) {
    const r = await startMockReplica({ profile: 'tiny', model: MODEL });
    replicas.push(r);
    await setFault(r.url, { mode: 'slow', delay_ms: 150 });
  }
  const usagePath = join(dir, 'usage.jsonl');
  const configPath = join(dir, 'gateway.yaml');
  writeFileSync(configPath, JSON.stringify({
    server: { host: '127.0.0.1', port: 0, shutdown_grace_ms: 10_000, threads: 2 },
    tokenizer: { threads: 0 },
    routing: TEST_INDEX_SIZES,
    registry: { scrape_interval_ms: 50, scrape_timeout_ms: 2000 },
    pools: [{ id: '8b', model: MODEL, aliases: ['gpt-fast'], max_context_tokens: 2048, default_max_tokens: 64,
      replicas: replicas.map((r, i) => ({ id: `8b-${i + 1}`, url: r.url })) }],
    tenants: [{ name: 'alpha', api_keys: [{ sha256: createHash('sha256').update(KEY).digest('hex') }], tokens_per_second: 1_000_000, burst_tokens: 10_000_000, max_inflight: 256 }],
  }));
  const child = spawn(process.execPath, [...MAIN, '--config', configPath], {
    cwd: new URL('../../../', import.meta.url).pathname,
    env: { ...process.env, USAGE_JSONL: usagePath, LOG_LEVEL: 'info', PORT: '', GATEWAY_CONFIG: '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  proc = child;
  let stdout = '';
  let stderr = '';
  child.stdout!.setEncoding('utf8').on('data', (c: string) => (stdout += c));
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (stderr += c));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const port = await waitFor(() => {
    const line = stdout.split('\n').find((l) => l.includes('gateway listening'));
    if (child.exitCode !== null) throw new Error(`gateway exited early: ${stderr}`);
    return line ? (JSON.parse(line) as { port: number }).port : 0;
  }, 60_000, 50);
  const url = `http://127.0.0.1:${port}`;
  await waitFor(async () => (await fetch(`${url}/readyz`)).status === 200, 15_000, 50);

  const streams = Array.from({ length: STREAMS }, (_, i) => openStream(url, '/v1/chat/completions',
    { model: 'gpt-fast', messages: [{ role: 'user', content: `tale ${i}` }], max_tokens: TOKENS, ignore_eos: true, stream: true },
    { authorization: `Bearer ${KEY}`, 'x-request-id': `drain-${i}` }));
  await Promise.all(streams.map((s) => s.waitFrames(2)));
  child.kill('SIGTERM');

  assert.equal(await waitFor(async () => ((await tryConnect(port)) === 'ECONNREFUSED' ? 'ECONNREFUSED' : ''), 5000, 10), 'ECONNREFUSED');
  for (const [i, s] of streams.entries()) {
    const { outcome, text } = await s.done;
    assert.equal(outcome, 'end', `stream ${i}`);
    assert.ok(text.endsWith('data: [DONE]\n\n') && !text.includes('"error"'), `stream ${i} finished cleanly: ${text.slice(-200)}`);
  }
  assert.equal(await exited, 0, `exit code (stderr: ${stderr.slice(-500)})`);

  // Both threads held streams when the signal came (each request's log line names its acceptor).
  const acceptors = new Set<number>();
  for (const line of stdout.split('\n')) {
    if (!line.includes('"drain-')) continue;
    const rec = JSON.parse(line) as { acceptor?: number };
    if (rec.acceptor !== undefined) acceptors.add(rec.acceptor);
  }
  assert.deepEqual([...acceptors].sort(), [0, 1]);

  const lines = readFileSync(usagePath, 'utf8').split('\n').filter(Boolean);
  const records = lines.map((l) => JSON.parse(l) as UsageRecord);
  assert.deepEqual(records.map((r) => r.request_id).sort(), streams.map((_, i) => `drain-${i}`).sort());
  for (const r of records) assert.equal(r.output_tokens, TOKENS);
});
