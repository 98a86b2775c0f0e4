// A request whose settlement fails part-way (the quota store or the usage recorder throws) is still answered,
// still settled as far as it can be (the quota before the usage record, the usage record after a failed
// quota settle), and still leaves the in-flight count: the request path never leaves a rejection unhandled
// (the test process would die of one) nor a request counted in flight forever (shutdown would wait on it).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { ALPHA_KEY, startStack, waitFor, type TestStack } from '../../helpers/start-gateway.ts';
import { spawnMockReplica, type SpawnedReplica } from '../../helpers/mock-replicas.ts';

const MODEL = 'llama-3.1-8b-instruct';
let stack: TestStack;
let replica: SpawnedReplica;

before(async () => {
  replica = await spawnMockReplica(['--profile', 'tiny', '--model', MODEL, '--seed', '1']);
  stack = await startStack({
    pools: [{ id: '8b', model: MODEL, replicas: [] }],
    externalReplicas: { '8b': [replica.url] },
    config: { routing: { policy: 'round-robin' } },
  });
});

after(async () => {
  await stack.close();
  await replica.kill();
});

async function chat(id: string): Promise<number> {
  const r = await fetch(`${stack.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ALPHA_KEY}`, 'content-type': 'application/json', 'x-request-id': id },
    body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hello' }], max_tokens: 4 }),
  });
  await r.text();
  return r.status;
}

test('a quota store that throws on settle: the reply is served, the usage record written, the request leaves', async () => {
  const quota = stack.gateway.services.quota;
  const own = Object.getOwnPropertyDescriptors(quota);
  const fail = (): never => {
    throw new Error('settle failed (test)');
  };
  quota.settle = () => Promise.reject(new Error('settle failed (test)'));
  if (quota.settleNow !== undefined) quota.settleNow = fail;
  try {
    assert.equal(await chat('settle-throws-1'), 200);
    const rec = await waitFor(async () => (await stack.usage()).find((r) => r.request_id === 'settle-throws-1'), 5000);
    assert.equal(rec.status, 200);
    await waitFor(() => stack.gateway.inflightCount === 0, 5000);
  } finally {
    for (const k of ['settle', 'settleNow'] as const) {
      if (k in own) Object.defineProperty(quota, k, own[k]!);
      else delete (quota as unknown as Record<string, unknown>)[k];
    }
  }
  assert.equal(await chat('settle-ok-after'), 200, 'the store works again once restored');
});

test('a usage recorder that throws: the reply is served and the request leaves the in-flight count', async () => {
  const usage = stack.gateway.services.usage;
  const record = usage.record.bind(usage);
  usage.record = () => {
    throw new Error('usage sink failed (test)');
  };
  try {
    assert.equal(await chat('usage-throws-1'), 200);
    await waitFor(() => stack.gateway.inflightCount === 0, 5000);
  } finally {
    usage.record = record;
  }
  assert.equal(await chat('usage-ok-after'), 200);
});
