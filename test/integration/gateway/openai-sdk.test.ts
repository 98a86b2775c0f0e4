// The gateway as an OpenAI client sees it: the official `openai` SDK against a real gateway and real mock
// replicas over loopback.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { ALPHA_KEY, startStack, type TestStack } from '../../helpers/start-gateway.ts';

let stack: TestStack;
let client: OpenAI;

before(async () => {
  stack = await startStack({
    pools: [
      {
        id: '8b', model: 'llama-3.1-8b-instruct', aliases: ['gpt-fast'],
        replicas: [{ profile: 'tiny' }, { profile: 'tiny' }],
      },
      {
        id: 'lora', model: 'llama-3.1-8b-lora', adapters: ['acme-sql', 'globex-legal'],
        replicas: [
          { profile: 'tiny', maxLoras: 2, loras: ['acme-sql'], configAdapters: ['acme-sql'] },
          { profile: 'tiny', maxLoras: 2, loras: ['globex-legal'], configAdapters: ['globex-legal'] },
        ],
      },
    ],
  });
  client = new OpenAI({ apiKey: ALPHA_KEY, baseURL: `${stack.url}/v1`, maxRetries: 0 });
});

after(async () => {
  await stack.close();
});

test('streams a chat completion chunk by chunk and ends cleanly', async () => {
  const stream = await client.chat.completions.create({
    model: 'llama-3.1-8b-instruct', messages: [{ role: 'user', content: 'Say hello' }], max_tokens: 6, stream: true,
  });
  let text = '';
  let chunks = 0;
  let finish: string | null = null;
  for await (const chunk of stream) {
    chunks++;
    assert.equal(chunk.usage ?? null, null, 'no usage chunk unless the client asked for it');
    text += chunk.choices[0]?.delta.content ?? '';
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  assert.equal(chunks, 7, 'role chunk + 6 token chunks');
  assert.ok(text.length > 0);
  assert.equal(finish, 'length');
});

test('includes the usage chunk when asked, with prompt tokens equal to the gateway count', async () => {
  const stream = await client.chat.completions.create({
    model: 'gpt-fast', messages: [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Count to three' }],
    max_tokens: 4, stream: true, stream_options: { include_usage: true },
  });
  let usage: OpenAI.CompletionUsage | null | undefined;
  for await (const chunk of stream) if (chunk.usage) usage = chunk.usage;
  assert.ok(usage, 'usage chunk relayed');
  assert.equal(usage.completion_tokens, 4);
  const rec = (await stack.usage()).at(-1)!;
  assert.equal(rec.input_tokens, usage.prompt_tokens);
  assert.equal(rec.output_tokens, 4);
  assert.equal(rec.model, 'gpt-fast');
  assert.equal(rec.pool, '8b');
});

test('answers a non-streaming chat completion with the replica body', async () => {
  const res = await client.chat.completions.create({ model: 'gpt-fast', messages: [{ role: 'user', content: 'hi' }], max_tokens: 3 });
  assert.equal(res.object, 'chat.completion');
  assert.equal(res.usage?.completion_tokens, 3);
  assert.equal(res.choices[0]?.finish_reason, 'length');
});

test('serves streaming and non-streaming text completions', async () => {
  const res = await client.completions.create({ model: 'llama-3.1-8b-instruct', prompt: 'Once upon a time', max_tokens: 5 });
  assert.equal(res.object, 'text_completion');
  assert.equal(res.usage?.completion_tokens, 5);
  const stream = await client.completions.create({ model: 'gpt-fast', prompt: 'Once upon a time', max_tokens: 5, stream: true });
  let n = 0;
  for await (const c of stream) if (c.choices.length > 0) n++;
  assert.equal(n, 5);
});

test('sends a LoRA adapter only to a replica that hosts it', async () => {
  for (let i = 0; i < 6; i++) {
    const { response } = await client.chat.completions.create({
      model: 'globex-legal', messages: [{ role: 'user', content: `case ${i}` }], max_tokens: 2,
    }).withResponse();
    assert.match(response.headers.get('x-gateway-route') ?? '', /^replica=lora-2;/);
  }
  const res = await client.chat.completions.create({ model: 'acme-sql', messages: [{ role: 'user', content: 'select' }], max_tokens: 2 });
  assert.equal(res.model, 'acme-sql');
  const state = await (await fetch(`${stack.replicas.get('lora-1')!.url}/_mock/state`)).json() as { requests: Array<{ adapter: string | null }> };
  assert.ok(state.requests.every((r) => r.adapter !== 'globex-legal'));
});

test('lists pools, aliases and adapters on /v1/models', async () => {
  const ids = [];
  for await (const m of client.models.list()) ids.push(m.id);
  assert.deepEqual(ids.sort(), ['acme-sql', 'globex-legal', 'gpt-fast', 'llama-3.1-8b-instruct', 'llama-3.1-8b-lora'].sort());
});

test('an unknown model is a NotFoundError with code model_not_found', async () => {
  await assert.rejects(client.chat.completions.create({ model: 'nope', messages: [{ role: 'user', content: 'x' }] }), (err: unknown) => {
    assert.ok(err instanceof OpenAI.NotFoundError);
    assert.equal(err.code, 'model_not_found');
    return true;
  });
});

test('a bad key is an AuthenticationError and writes no usage record', async () => {
  const before = (await stack.usage()).length;
  const bad = new OpenAI({ apiKey: 'sk-wrong', baseURL: `${stack.url}/v1`, maxRetries: 0 });
  await assert.rejects(bad.chat.completions.create({ model: 'gpt-fast', messages: [{ role: 'user', content: 'x' }] }), OpenAI.AuthenticationError);
  assert.equal((await stack.usage()).length, before);
});

test('malformed JSON is a 400 invalid_json and a bad field names its param', async () => {
  const res = await fetch(`${stack.url}/v1/chat/completions`, {
    method: 'POST', headers: { authorization: `Bearer ${ALPHA_KEY}`, 'content-type': 'application/json' }, body: '{"model": ',
  });
  assert.equal(res.status, 400);
  const body = await res.json() as { error: { code: string; type: string } };
  assert.equal(body.error.code, 'invalid_json');
  assert.equal(body.error.type, 'invalid_request_error');
  await assert.rejects(client.chat.completions.create({ model: 'gpt-fast', messages: [{ role: 'user', content: 'x' }], max_tokens: -3 }), (err: unknown) => {
    assert.ok(err instanceof OpenAI.BadRequestError);
    assert.equal(err.code, 'invalid_value');
    assert.equal(err.param, 'max_tokens');
    return true;
  });
});

test('a prompt plus max_tokens over the context length is refused before routing', async () => {
  await assert.rejects(client.chat.completions.create({ model: 'gpt-fast', messages: [{ role: 'user', content: 'x' }], max_tokens: 5000 }), (err: unknown) => {
    assert.ok(err instanceof OpenAI.BadRequestError);
    assert.equal(err.code, 'context_length_exceeded');
    return true;
  });
});

test('echoes the client x-request-id and uses it in the usage record', async () => {
  const { response } = await client.chat.completions.create(
    { model: 'gpt-fast', messages: [{ role: 'user', content: 'id' }], max_tokens: 2 },
    { headers: { 'x-request-id': 'req-abc-123' } },
  ).withResponse();
  assert.equal(response.headers.get('x-request-id'), 'req-abc-123');
  const rec = (await stack.usage()).find((r) => r.request_id === 'req-abc-123');
  assert.ok(rec);
  assert.equal(rec.status, 200);
  assert.equal(rec.tenant, 'alpha');
  assert.equal(rec.cancelled, false);
  assert.equal(rec.retries, 0);
  assert.ok(rec.replica?.startsWith('8b-'));
});

test('the poller thread reports its scrapes on the gateway /metrics page', async () => {
  const page = await (await fetch(`${stack.url}/metrics`)).text();
  const ok = /^gateway_replica_scrapes_total\{[^}]*result="ok"[^}]*\} (\d+)/m.exec(page);
  assert.ok(ok && Number(ok[1]) > 0, 'scrapes counted from the poller thread');
  assert.match(page, /^gateway_replica_scrape_duration_seconds_count(\{[^}]*\})? [1-9]/m);
});
