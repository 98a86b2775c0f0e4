// LoRA over HTTP: /v1/models cards with parent, runtime load/unload bodies and statuses
// (docs/vllm-facts.md "LoRA adapters"), requests by adapter name, and an adapter beyond max_loras waiting for a slot.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startMockReplica, type MockReplica } from '../../helpers/mock-replicas.ts';
import { mockState, openStream, postJson } from './http-client.ts';

interface ModelCard { id: string; root: string; parent: string | null; max_model_len: number | null; owned_by: string }

let replica: MockReplica;
before(async () => {
  replica = await startMockReplica({ profile: 'tiny', model: 'base-model', loras: ['acme-sql'], maxLoras: 1 });
});
after(() => replica.close());

async function models(): Promise<ModelCard[]> {
  return ((await (await fetch(`${replica.url}/v1/models`)).json()) as { data: ModelCard[] }).data;
}

void test('/v1/models lists the base model, then each adapter with parent = base and no max_model_len', async () => {
  const data = await models();
  assert.deepEqual(data.map((m) => [m.id, m.parent, m.max_model_len, m.owned_by]), [
    ['base-model', null, 2048, 'vllm'],
    ['acme-sql', 'base-model', null, 'vllm'],
  ]);
});

void test('load, duplicate load, request by adapter name, unload, then 404 for the name', async () => {
  const load = await postJson(replica.url, '/v1/load_lora_adapter', { lora_name: 'globex', lora_path: '/adapters/globex' });
  assert.equal(load.status, 200);
  assert.equal(load.text, "Success: LoRA adapter 'globex' added successfully.");
  const dup = await postJson(replica.url, '/v1/load_lora_adapter', { lora_name: 'globex', lora_path: '/adapters/globex' });
  assert.equal(dup.status, 400);
  assert.match(dup.text, /has already been loaded/);
  const missing = await postJson(replica.url, '/v1/load_lora_adapter', { lora_name: 'x' });
  assert.equal(missing.status, 400);
  const card = (await models()).find((m) => m.id === 'globex');
  assert.deepEqual([card?.root, card?.parent], ['/adapters/globex', 'base-model']);

  const chat = await postJson(replica.url, '/v1/chat/completions', { model: 'globex', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 });
  assert.equal(chat.status, 200);
  assert.equal((JSON.parse(chat.text) as { model: string }).model, 'globex', 'the response names the adapter');
  assert.ok((await mockState(replica.url)).loaded_adapters.includes('globex'));

  const unload = await postJson(replica.url, '/v1/unload_lora_adapter', { lora_name: 'globex' });
  assert.equal(unload.status, 200);
  assert.equal(unload.text, "Success: LoRA adapter 'globex' removed successfully.");
  const again = await postJson(replica.url, '/v1/unload_lora_adapter', { lora_name: 'globex' });
  assert.equal(again.status, 404);
  const gone = await postJson(replica.url, '/v1/chat/completions', { model: 'globex', messages: [{ role: 'user', content: 'hi' }] });
  assert.equal(gone.status, 404);
  assert.match(gone.text, /The model `globex` does not exist\./);
});

void test('with max_loras 1 a request for a second adapter waits while the first adapter runs', async () => {
  await postJson(replica.url, '/v1/load_lora_adapter', { lora_name: 'initech', lora_path: '/adapters/initech' });
  const long = openStream(replica.url, '/v1/chat/completions', { model: 'acme-sql', messages: [{ role: 'user', content: 'a' }], max_tokens: 1500, ignore_eos: true, stream: true }, { 'x-request-id': 'holder' });
  await long.waitFrames(3);
  const other = openStream(replica.url, '/v1/chat/completions', { model: 'initech', messages: [{ role: 'user', content: 'b' }], max_tokens: 2, stream: true }, { 'x-request-id': 'waiter' });
  await new Promise((r) => setTimeout(r, 50));
  const s = await mockState(replica.url);
  assert.equal(s.requests.find((r) => r.id === 'waiter')?.state, 'waiting', JSON.stringify(s.requests.slice(-3)));
  const metrics = await (await fetch(`${replica.url}/metrics`)).text();
  assert.match(metrics, /vllm:lora_requests_info\{max_lora="1",running_lora_adapters="acme-sql",waiting_lora_adapters="initech"\}/);
  long.destroy();
  const done = await other.done;
  assert.ok(done.text.endsWith('data: [DONE]\n\n'), 'it runs once the slot frees');
});
