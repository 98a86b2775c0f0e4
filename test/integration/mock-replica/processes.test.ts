// The mock as child processes: spawnMockReplica (port 0, URL parsed from the child's line, kill(), start
// errors) through startFleet from a gateway config (one process per replica, the pool's model/profile/adapters/context,
// one replica killed alone while the others serve).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseConfig } from '../../../src/config/load.ts';
import { spawnMockReplica } from '../../helpers/mock-replicas.ts';
import { fleetReplicaArgs, startFleet } from '../../mock-replica/fleet.ts';
import { postJson } from './http-client.ts';

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
