// A config reload with an invalid file while 20 streams are in flight through the real gateway process
// (`src/main.ts --config FILE`): the running config keeps serving (every stream ends with [DONE], new
// requests are served), the rejection is logged and counted (gateway_config_reloads_total{result="rejected"});
// a valid file afterwards is applied and counted.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { stringify } from 'yaml';
import { startMockReplica } from '../../helpers/mock-replicas.ts';
import { TEST_INDEX_SIZES, waitFor } from '../../helpers/start-gateway.ts';
import { setFault } from './fleet-under-load.ts';
import { nodeEntry } from '../../helpers/node-entry.ts';

const KEY = 'sk-reload-test';
const MODEL = 'llama-3.1-8b-instruct';
const MAIN = nodeEntry('../../../src/main', import.meta.url);

function config(port: number, urls: string[], aliases: string[]): string {
  return stringify({
    server: { host: '127.0.0.1', port },
    // The mocks are slowed to 100 ms per token to keep streams open across the reload: a loose TPOT target
    // keeps admission in GPU time from shedding them (this test is about the reload, not the SLO).
    pools: [{ id: '8b', model: MODEL, aliases, max_context_tokens: 2048, engine: { tpot_target_ms: 1000 }, replicas: urls.map((url, i) => ({ id: `r${i}`, url })) }],
    tenants: [{ name: 'alpha', api_keys: [{ sha256: createHash('sha256').update(KEY).digest('hex') }], tokens_per_second: 1e6, burst_tokens: 1e7, max_inflight: 256 }],
    registry: { scrape_interval_ms: 50 },
    routing: TEST_INDEX_SIZES,
  });
}

async function chat(url: string, model: string, stream: boolean): Promise<{ status: number; text: string }> {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST', headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'reload' }], max_tokens: 10, ignore_eos: true, stream }),
  });
  return { status: res.status, text: await res.text() };
}

const reloads = async (url: string, result: string): Promise<number> =>
  Number(new RegExp(`^gateway_config_reloads_total\\{result="${result}"\\} (\\d+)`, 'm').exec(await (await fetch(`${url}/metrics`)).text())?.[1] ?? NaN);

test('an invalid config file on reload keeps the running one under load; logged and counted', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'expediter-reload-'));
  const replicas = await Promise.all([0, 1].map(() => startMockReplica({ model: MODEL, profile: 'tiny', maxNumSeqs: 64 })));
  // ~1 s per stream, so the reload lands while they run.
  for (const r of replicas) await setFault(r.url, { mode: 'slow', delay_ms: 100 });
  const { createServer } = await import('node:net');
  const port = await new Promise<number>((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const p = (s.address() as { port: number }).port;
      s.close(() => resolve(p));
    });
  });
  const file = join(dir, 'gateway.yaml');
  writeFileSync(file, config(port, replicas.map((r) => r.url), ['gpt-fast']));
  const child = spawn(process.execPath, [...MAIN, '--config', file], { env: { ...process.env, LOG_LEVEL: 'info' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  child.stdout.on('data', (d: Buffer) => { log += d.toString(); });
  child.stderr.on('data', (d: Buffer) => { log += d.toString(); });
  t.after(async () => {
    if (child.exitCode === null) {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGKILL');
      await exited;
    }
    await Promise.all(replicas.map((r) => r.close()));
    rmSync(dir, { recursive: true, force: true });
  });
  const url = `http://127.0.0.1:${port}`;
  await waitFor(async () => (await fetch(`${url}/readyz`).catch(() => null))?.status === 200, 60_000, 100);

  const streams = Array.from({ length: 20 }, () => chat(url, 'gpt-fast', true));
  await new Promise((r) => setTimeout(r, 200));
  writeFileSync(file, 'pools: [this is not: a valid config\n');
  child.kill('SIGHUP');
  await waitFor(() => log.includes('configuration rejected'), 10_000, 20);
  for (const s of await Promise.all(streams)) {
    assert.equal(s.status, 200);
    assert.ok(s.text.endsWith('data: [DONE]\n\n'), s.text.slice(-200));
    assert.ok(!s.text.includes('"error"'));
  }
  assert.equal((await chat(url, 'gpt-fast', false)).status, 200, 'the running config still serves');
  assert.ok(await reloads(url, 'rejected') >= 1);
  assert.equal(await reloads(url, 'applied'), 0);

  writeFileSync(file, config(port, replicas.map((r) => r.url), ['gpt-fast', 'gpt-new']));
  child.kill('SIGHUP');
  await waitFor(async () => await reloads(url, 'applied') >= 1, 10_000, 50);
  assert.equal((await chat(url, 'gpt-new', false)).status, 200, 'a valid file afterwards is applied');
});
