// Client compatibility: the official `openai` SDK against a real gateway and mock replicas over loopback, as a
// user drives it: chat and completions, streamed and not, usage equal to the gateway's record, abort, typed
// errors, a retried 429, LoRA adapters, and the model list. (Its never-fits 429 is in
// test/integration/gateway/rate-limit-retry.test.ts.)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { OpenAI, openaiClient } from './openai-sdk.ts';
import {
  ALPHA_KEY, BASE_MODEL, LORA_BASE, RETRY_KEY, afterOneRetryable429, assertCancelled, dieMidStream, recordOf, recordsOf, replicaOf, replicaPhase,
  slowReplicas, startClientStack, type TestStack,
} from './client-stack.ts';

let stack: TestStack;
let client: OpenAI;

before(async () => {
  stack = await startClientStack();
  client = openaiClient(stack.url, ALPHA_KEY);
});

after(async () => {
  await stack.close();
});

test('non-streaming chat: the replica\'s completion, usage equal to the gateway\'s record', async () => {
  const res = await client.chat.completions.create(
    { model: 'gpt-fast', messages: [{ role: 'user', content: 'hi' }], max_tokens: 3 },
    { headers: { 'x-request-id': 'oa-chat' } },
  );
  assert.equal(res.object, 'chat.completion');
  assert.equal(res._request_id, 'oa-chat', 'the SDK reads the echoed x-request-id');
  assert.equal(res.choices[0]?.finish_reason, 'length');
  assert.ok((res.choices[0]?.message.content ?? '').length > 0);
  const rec = await recordOf(stack, 'oa-chat');
  assert.equal(rec.status, 200);
  assert.equal(res.usage?.prompt_tokens, rec.input_tokens);
  assert.equal(res.usage?.completion_tokens, rec.output_tokens);
  assert.equal(rec.output_tokens, 3);
});

test('streaming chat: text arrives while the replica is still generating, and the usage chunk equals the record', async () => {
  await slowReplicas(stack, 5);
  try {
    const stream = await client.chat.completions.create(
      { model: 'gpt-fast', messages: [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Count to eight' }], max_tokens: 8, stream: true, stream_options: { include_usage: true } },
      { headers: { 'x-request-id': 'oa-stream' } },
    );
    const deltas: string[] = [];
    let phaseAtFirst: string | undefined;
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) {
      const d = chunk.choices[0]?.delta.content;
      if (d) {
        if (deltas.length === 0) phaseAtFirst = replicaPhase(stack, replicaOf(stack, 'oa-stream') ?? '', 'oa-stream');
        deltas.push(d);
      }
      if (chunk.usage) usage = chunk.usage;
    }
    assert.equal(phaseAtFirst, 'running', 'the first text reached the client before the replica finished');
    assert.equal(deltas.length, 8, 'one delta per token');
    const rec = await recordOf(stack, 'oa-stream');
    assert.ok(usage, 'usage chunk relayed when asked for');
    assert.equal(usage.prompt_tokens, rec.input_tokens);
    assert.equal(usage.completion_tokens, rec.output_tokens);
    assert.equal(rec.output_tokens, 8);
  } finally {
    await slowReplicas(stack, 0);
  }
  // Without stream_options the usage chunk is not sent.
  const plain = await client.chat.completions.create({ model: 'gpt-fast', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, stream: true });
  for await (const chunk of plain) assert.equal(chunk.usage ?? null, null);
});

test('text completions, streamed and not, with usage equal to the record', async () => {
  const res = await client.completions.create({ model: BASE_MODEL, prompt: 'Once upon a time', max_tokens: 5 }, { headers: { 'x-request-id': 'oa-cmpl' } });
  assert.equal(res.object, 'text_completion');
  const rec = await recordOf(stack, 'oa-cmpl');
  assert.equal(res.usage?.prompt_tokens, rec.input_tokens);
  assert.equal(res.usage?.completion_tokens, 5);
  const stream = await client.completions.create(
    { model: 'gpt-fast', prompt: 'Once upon a time', max_tokens: 5, stream: true, stream_options: { include_usage: true } },
    { headers: { 'x-request-id': 'oa-cmpl-stream' } },
  );
  let text = '';
  let usage: OpenAI.CompletionUsage | undefined;
  for await (const c of stream) {
    text += c.choices[0]?.text ?? '';
    if (c.usage) usage = c.usage;
  }
  assert.ok(text.length > 0);
  const srec = await recordOf(stack, 'oa-cmpl-stream');
  assert.equal(usage?.prompt_tokens, srec.input_tokens);
  assert.equal(usage?.completion_tokens, srec.output_tokens);
});

test('aborting mid-stream: the SDK stops reading, the gateway records a cancel and the replica aborts', async () => {
  await slowReplicas(stack, 10);
  try {
    const ac = new AbortController();
    const stream = await client.chat.completions.create(
      { model: 'gpt-fast', messages: [{ role: 'user', content: 'a long story' }], max_tokens: 1800, stream: true },
      { headers: { 'x-request-id': 'oa-abort' }, signal: ac.signal },
    );
    // The SDK ends the iteration quietly when its own signal aborts it (no APIUserAbortError out of the loop).
    let deltas = 0;
    for await (const chunk of stream) if (chunk.choices[0]?.delta.content && ++deltas === 3) ac.abort();
    // Chunks already read off the socket may still be yielded; the stream then ends, far short of max_tokens.
    assert.ok(deltas >= 3 && deltas < 1800, `${deltas} deltas`);
    const rec = await assertCancelled(stack, 'oa-abort');
    assert.ok(rec.output_tokens >= 3 && rec.output_tokens < 1800, `output counted up to the abort: ${rec.output_tokens}`);
  } finally {
    await slowReplicas(stack, 0);
  }
});

test('a replica dying mid-stream: the gateway\'s error event is raised by the SDK as an APIError, not a clean end', async () => {
  await dieMidStream(stack, 3);
  try {
    const stream = await client.chat.completions.create(
      { model: 'gpt-fast', messages: [{ role: 'user', content: 'die' }], max_tokens: 20, stream: true },
      { headers: { 'x-request-id': 'oa-die' } },
    );
    let text = '';
    await assert.rejects(async () => {
      for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    }, (err: unknown) => {
      assert.ok(err instanceof OpenAI.APIError, `got ${String(err)}`);
      assert.equal(err.code, 'upstream_error');
      return true;
    });
    assert.ok(text.length > 0, 'the text before the failure was delivered');
    assert.equal((await recordOf(stack, 'oa-die')).output_tokens, 3);
  } finally {
    await slowReplicas(stack, 0);
  }
});

test('errors arrive as the SDK\'s typed errors with the OpenAI fields', async () => {
  await assert.rejects(client.chat.completions.create({ model: 'nope', messages: [{ role: 'user', content: 'x' }] }), (err: unknown) => {
    assert.ok(err instanceof OpenAI.NotFoundError);
    assert.equal(err.code, 'model_not_found');
    return true;
  });
  const before = (await stack.usage()).length;
  const bad = openaiClient(stack.url, 'sk-wrong');
  await assert.rejects(bad.chat.completions.create({ model: 'gpt-fast', messages: [{ role: 'user', content: 'x' }] }), (err: unknown) => {
    assert.ok(err instanceof OpenAI.AuthenticationError);
    assert.equal(err.code, 'invalid_api_key');
    return true;
  });
  assert.equal((await stack.usage()).length, before, 'no tenant, no usage record');
  await assert.rejects(client.chat.completions.create({ model: 'gpt-fast', messages: [{ role: 'user', content: 'x' }], max_tokens: -3 }), (err: unknown) => {
    assert.ok(err instanceof OpenAI.BadRequestError);
    assert.equal(err.code, 'invalid_value');
    assert.equal(err.param, 'max_tokens');
    return true;
  });
  await assert.rejects(client.chat.completions.create({ model: 'gpt-fast', messages: [{ role: 'user', content: 'x' }], max_tokens: 9000 }), (err: unknown) => {
    assert.ok(err instanceof OpenAI.BadRequestError);
    assert.equal(err.code, 'context_length_exceeded');
    assert.match(err.message, /you requested \d+ tokens \(\d+ in the messages, 9000 in the completion\)/);
    return true;
  });
  // A prompt longer than the context, no max_tokens: the input is what is too long, never a negative completion.
  await assert.rejects(client.chat.completions.create({ model: 'gpt-fast', messages: [{ role: 'user', content: 'word '.repeat(9000) }] }), (err: unknown) => {
    assert.ok(err instanceof OpenAI.BadRequestError);
    assert.equal(err.code, 'context_length_exceeded');
    assert.equal(err.param, 'messages');
    assert.match(err.message, /maximum context length is 8192 tokens\. However, your request has \d{4,} input tokens\. Please reduce the length of the messages\./);
    assert.doesNotMatch(err.message, /-\d/);
    return true;
  });
});

test('a retryable 429 (the tenant\'s one slot taken) is retried after its Retry-After and then succeeds', async () => {
  const retrying = openaiClient(stack.url, RETRY_KEY, { maxRetries: 2 });
  const { value, error } = await afterOneRetryable429(stack, 'oa-retry', () =>
    retrying.chat.completions.create({ model: 'gpt-fast', messages: [{ role: 'user', content: 'again' }], max_tokens: 1 }, { headers: { 'x-request-id': 'oa-retry' } }));
  assert.equal(error, undefined);
  assert.equal(value?.choices.length, 1);
  assert.deepEqual((await recordsOf(stack, 'oa-retry')).map((r) => r.status), [429, 200], 'refused once, then served');
});

test('a LoRA adapter name reaches only a replica that hosts it and comes back as the model', async () => {
  for (let i = 0; i < 4; i++) {
    const { data, response } = await client.chat.completions.create({
      model: 'globex-legal', messages: [{ role: 'user', content: `case ${i}` }], max_tokens: 2,
    }).withResponse();
    assert.equal(data.model, 'globex-legal');
    assert.match(response.headers.get('x-gateway-route') ?? '', /^replica=lora-2;/);
  }
  const res = await client.completions.create({ model: 'acme-sql', prompt: 'select', max_tokens: 2 });
  assert.equal(res.model, 'acme-sql');
  assert.ok(stack.replicas.get('lora-1')!.engine.snapshot().requests.every((r) => r.adapter !== 'globex-legal'));
});

test('models.list() names every model, alias and adapter; models.retrieve() returns one', async () => {
  const ids: string[] = [];
  for await (const m of client.models.list()) ids.push(m.id);
  assert.deepEqual(ids.sort(), ['acme-sql', 'globex-legal', 'gpt-fast', BASE_MODEL, LORA_BASE].sort());
  const one = await client.models.retrieve('gpt-fast');
  assert.equal(one.id, 'gpt-fast');
  assert.equal(one.object, 'model');
  assert.equal((await client.models.retrieve('acme-sql')).id, 'acme-sql');
  await assert.rejects(client.models.retrieve('gpt-slow'), OpenAI.NotFoundError);
});

test('the client\'s x-request-id is echoed and names the usage record', async () => {
  const { response } = await client.chat.completions.create(
    { model: 'gpt-fast', messages: [{ role: 'user', content: 'id' }], max_tokens: 2 },
    { headers: { 'x-request-id': 'req-abc-123' } },
  ).withResponse();
  assert.equal(response.headers.get('x-request-id'), 'req-abc-123');
  const rec = await recordOf(stack, 'req-abc-123');
  assert.equal(rec.tenant, 'alpha');
  assert.equal(rec.cancelled, false);
  assert.equal(rec.retries, 0);
  assert.ok(rec.replica?.startsWith('8b-'));
});
