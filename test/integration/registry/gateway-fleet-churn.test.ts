// The registry seen through the real gateway: mock replicas in their own processes are killed, restarted on
// the same port, removed and added by reload, and the gateway's routing follows.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseConfig } from '../../../src/config/load.ts';
import { spawnMockReplica, startMockReplica, type SpawnedReplica } from '../../helpers/mock-replicas.ts';
import { ALPHA_KEY, startStack, type TestStack } from '../../helpers/start-gateway.ts';
import { ReplicaRow } from '../../../src/registry/replica-table.ts';
import { ROW_STATE } from '../../../src/registry/replica-table-layout.ts';
import { waitFor } from './vllm-page-server.ts';

const INTERVAL_MS = 100;
const MODEL = 'llama-3.1-8b-instruct';
const MOCK_ARGS = ['--profile', 'tiny', '--model', MODEL, '--time-scale', '0.01'];

async function chat(stack: TestStack, tag: string): Promise<{ status: number; replica: string }> {
  const res = await fetch(`${stack.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${ALPHA_KEY}` },
    body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: `hello ${tag}` }], max_tokens: 2 }),
  });
  await res.arrayBuffer();
  const route = res.headers.get('x-gateway-route') ?? '';
  return { status: res.status, replica: /replica=([^;]+)/.exec(route)?.[1] ?? route.split(';')[0]!.trim() };
}

void test('killed, restarted, removed and added replicas: the gateway routes only to the live members', async (t) => {
  // 8b-x1 is its own process (so it can be killed -9); 8b-1 runs in this process (cheaper to start).
  const t0 = Date.now();
  const a = await spawnMockReplica(MOCK_ARGS);
  const spawned: SpawnedReplica[] = [a];
  const stack = await startStack({
    pools: [{ id: '8b', model: MODEL, replicas: [{ profile: 'tiny', model: MODEL, timeScale: 0.01 }] }],
    externalReplicas: { '8b': [a.url] },
    config: { routing: { policy: 'round-robin' }, registry: { scrape_interval_ms: INTERVAL_MS, scrape_timeout_ms: 1000, down_after_failures: 2 } },
  });
  t.after(async () => {
    await stack.close();
    for (const r of spawned) await r.kill('SIGKILL');
  });
  t.diagnostic(`setup ${Date.now() - t0} ms`);
  const reg = stack.gateway.registry;
  const slotA = reg.slotOf('8b-x1');
  const restarts: number[] = [];
  reg.onRestart((slot) => restarts.push(slot));

  const first = await Promise.all([0, 1, 2, 3].map((i) => chat(stack, `warm ${i}`)));
  assert.deepEqual(new Set(first.map((r) => r.replica)), new Set(['8b-x1', '8b-1']), 'round robin uses both');

  // Kill -9: the process is gone, connections are refused.
  await a.kill('SIGKILL');
  // Down once two consecutive scrapes failed, never before: every row read on the way agrees.
  const row = new ReplicaRow();
  const seen: Array<[number, number]> = [];
  const downMs = await waitFor(() => {
    if (reg.table.read(slotA, row)) seen.push([row.scrapeFailures, row.state]);
    return !reg.isHealthy(slotA);
  }, 100 * INTERVAL_MS, '8b-x1 to be marked down');
  t.diagnostic(`8b-x1 marked down ${downMs} ms after its process was killed (interval ${INTERVAL_MS} ms)`);
  for (const [failures, state] of seen) assert.equal(state, failures >= 2 ? ROW_STATE.DOWN : ROW_STATE.UP, `state ${state} with ${failures} failed scrapes`);
  assert.equal(reg.table.state(slotA), ROW_STATE.DOWN);
  const during = await Promise.all([0, 1, 2, 3, 4, 5].map((i) => chat(stack, `down ${i}`)));
  assert.ok(during.every((r) => r.status === 200 && r.replica === '8b-1'), JSON.stringify(during));

  // The same replica comes back on the same port as a new process.
  const t1 = Date.now();
  const a2 = await spawnMockReplica([...MOCK_ARGS, '--port', String(a.port)]);
  spawned.push(a2);
  t.diagnostic(`respawn ${Date.now() - t1} ms`);
  await waitFor(() => reg.isHealthy(slotA), 100 * INTERVAL_MS, '8b-x1 to come back');
  await waitFor(() => restarts.includes(slotA), 100 * INTERVAL_MS, 'the restart to be reported');
  const after = await Promise.all([0, 1, 2, 3].map((i) => chat(stack, `back ${i}`)));
  assert.deepEqual(new Set(after.map((r) => r.replica)), new Set(['8b-x1', '8b-1']));

  // Reload: remove 8b-1, add a new replica 8b-new.
  const c = await startMockReplica({ profile: 'tiny', model: MODEL, timeScale: 0.01 });
  t.after(() => c.close());
  const raw = structuredClone(stack.cfg) as unknown as { pools: Array<{ replicas: Array<{ id: string; url: string }> }> };
  raw.pools[0]!.replicas = [{ id: '8b-x1', url: a.url }, { id: '8b-new', url: c.url }];
  await stack.gateway.reload(parseConfig(raw));
  assert.equal(reg.slotOf('8b-1'), -1);
  await waitFor(() => reg.isHealthy(reg.slotOf('8b-new')), 100 * INTERVAL_MS, '8b-new to enter rotation');
  const reloaded = await Promise.all([0, 1, 2, 3, 4, 5].map((i) => chat(stack, `reload ${i}`)));
  assert.ok(reloaded.every((r) => r.status === 200), JSON.stringify(reloaded));
  assert.deepEqual(new Set(reloaded.map((r) => r.replica)), new Set(['8b-x1', '8b-new']), 'the removed replica gets nothing');
});
