// Client compatibility: LangChain's ChatOpenAI and OpenAI (completions) LLM against a real gateway and mock
// replicas over loopback: invoke and stream with usage metadata, abort, typed errors, LangChain's own retry
// of a 429, LoRA adapters.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { ContextOverflowError, HumanMessage, SystemMessage, chatModel, completionsModel } from './langchain.ts';
import {
  ALPHA_KEY, BASE_MODEL, RETRY_KEY, TINY_KEY, afterOneRetryable429, assertCancelled, dieMidStream, recordOf, recordsOf, replicaOf, replicaPhase,
  slowReplicas, startClientStack, type TestStack,
} from './client-stack.ts';

let stack: TestStack;

before(async () => {
  stack = await startClientStack();
});

after(async () => {
  await stack.close();
});

/** The OpenAI-style fields LangChain leaves on the SDK error it rethrows. */
interface WrappedError { status?: number; code?: string; lc_error_code?: string; message: string }

test('ChatOpenAI.invoke: the reply, with usage_metadata equal to the gateway\'s record', async () => {
  const chat = chatModel(stack.url, ALPHA_KEY, { model: 'gpt-fast', maxTokens: 3, requestId: 'lc-chat' });
  const msg = await chat.invoke([new HumanMessage('hi')]);
  assert.ok(typeof msg.content === 'string' && msg.content.length > 0);
  assert.equal(msg.response_metadata.finish_reason, 'length');
  const rec = await recordOf(stack, 'lc-chat');
  assert.equal(msg.usage_metadata?.input_tokens, rec.input_tokens);
  assert.equal(msg.usage_metadata?.output_tokens, rec.output_tokens);
  assert.equal(rec.output_tokens, 3);
});

test('ChatOpenAI.stream: text arrives while the replica is still generating, and the usage equals the record', async () => {
  const chat = chatModel(stack.url, ALPHA_KEY, { model: 'gpt-fast', maxTokens: 8, requestId: 'lc-stream' });
  await slowReplicas(stack, 5);
  try {
    const deltas: string[] = [];
    let phaseAtFirst: string | undefined;
    let input: number | undefined;
    let output: number | undefined;
    for await (const chunk of await chat.stream([new SystemMessage('You are terse.'), new HumanMessage('Count to eight')])) {
      if (typeof chunk.content === 'string' && chunk.content) {
        if (deltas.length === 0) phaseAtFirst = replicaPhase(stack, replicaOf(stack, 'lc-stream') ?? '', 'lc-stream');
        deltas.push(chunk.content);
      }
      if (chunk.usage_metadata) ({ input_tokens: input, output_tokens: output } = chunk.usage_metadata);
    }
    assert.equal(phaseAtFirst, 'running', 'the first text reached the client before the replica finished');
    assert.equal(deltas.length, 8, 'one chunk per token');
    const rec = await recordOf(stack, 'lc-stream');
    assert.equal(input, rec.input_tokens);
    assert.equal(output, rec.output_tokens);
  } finally {
    await slowReplicas(stack, 0);
  }
});

test('the completions LLM, generated and streamed, with token usage equal to the record', async () => {
  const llm = completionsModel(stack.url, ALPHA_KEY, { model: BASE_MODEL, maxTokens: 5, requestId: 'lc-cmpl' });
  const res = await llm.generate(['Once upon a time']);
  assert.ok((res.generations[0]?.[0]?.text ?? '').length > 0);
  const rec = await recordOf(stack, 'lc-cmpl');
  const usage = res.llmOutput?.tokenUsage as { promptTokens?: number; completionTokens?: number } | undefined;
  assert.equal(usage?.promptTokens, rec.input_tokens);
  assert.equal(usage?.completionTokens, 5);
  const streamed = completionsModel(stack.url, ALPHA_KEY, { model: 'gpt-fast', maxTokens: 5, requestId: 'lc-cmpl-stream' });
  let parts = 0;
  for await (const s of await streamed.stream('Once upon a time')) if (s) parts++;
  assert.equal(parts, 5);
  assert.equal((await recordOf(stack, 'lc-cmpl-stream')).output_tokens, 5);
});

test('aborting a stream through its signal: LangChain raises AbortError, the gateway records a cancel and the replica aborts', async () => {
  const chat = chatModel(stack.url, ALPHA_KEY, { model: 'gpt-fast', maxTokens: 1800, requestId: 'lc-abort' });
  await slowReplicas(stack, 10);
  try {
    const ac = new AbortController();
    let deltas = 0;
    await assert.rejects(async () => {
      for await (const chunk of await chat.stream([new HumanMessage('a long story')], { signal: ac.signal })) {
        if (chunk.content && ++deltas === 3) ac.abort();
      }
    }, (err: Error) => err.name === 'AbortError' || /abort/i.test(err.message));
    const rec = await assertCancelled(stack, 'lc-abort');
    assert.ok(rec.output_tokens >= 3 && rec.output_tokens < 1800, `output counted up to the abort: ${rec.output_tokens}`);
  } finally {
    await slowReplicas(stack, 0);
  }
});

test('a replica dying mid-stream: the stream raises the gateway\'s error instead of ending cleanly', async () => {
  const chat = chatModel(stack.url, ALPHA_KEY, { model: 'gpt-fast', maxTokens: 20, requestId: 'lc-die' });
  await dieMidStream(stack, 3);
  try {
    let text = '';
    await assert.rejects(async () => {
      for await (const chunk of await chat.stream('die')) text += typeof chunk.content === 'string' ? chunk.content : '';
    }, (err: WrappedError) => {
      assert.equal(err.code, 'upstream_error');
      return true;
    });
    assert.ok(text.length > 0, 'the text before the failure was delivered');
    assert.equal((await recordOf(stack, 'lc-die')).output_tokens, 3);
  } finally {
    await slowReplicas(stack, 0);
  }
});

test('errors arrive as LangChain\'s typed errors, not retried', async () => {
  const lost = chatModel(stack.url, ALPHA_KEY, { model: 'nope', maxRetries: 2, requestId: 'lc-404' });
  await assert.rejects(lost.invoke('x'), (err: WrappedError) => {
    assert.equal(err.status, 404);
    assert.equal(err.code, 'model_not_found');
    assert.equal(err.lc_error_code, 'MODEL_NOT_FOUND');
    return true;
  });
  assert.equal((await recordsOf(stack, 'lc-404')).length, 1, 'sent once');
  const bad = chatModel(stack.url, 'sk-wrong', { model: 'gpt-fast', maxRetries: 2 });
  await assert.rejects(bad.invoke('x'), (err: WrappedError) => {
    assert.equal(err.status, 401);
    assert.equal(err.code, 'invalid_api_key');
    assert.equal(err.lc_error_code, 'MODEL_AUTHENTICATION');
    return true;
  });
  const long = chatModel(stack.url, ALPHA_KEY, { model: 'gpt-fast', maxTokens: 9000, maxRetries: 2 });
  await assert.rejects(long.invoke('x'), ContextOverflowError);
});

test('a retryable 429 (the tenant\'s one slot taken) is retried by LangChain after its Retry-After and then succeeds', async () => {
  const chat = chatModel(stack.url, RETRY_KEY, { model: 'gpt-fast', maxTokens: 1, maxRetries: 2, requestId: 'lc-retry' });
  const { value, error } = await afterOneRetryable429(stack, 'lc-retry', () => chat.invoke('again'));
  assert.equal(error, undefined);
  assert.equal(value?.usage_metadata?.output_tokens, 1);
  assert.deepEqual((await recordsOf(stack, 'lc-retry')).map((r) => r.status), [429, 200], 'refused once, then served');
});

test('the never-fits 429 (no Retry-After) is not retried', async () => {
  const chat = chatModel(stack.url, TINY_KEY, { model: 'gpt-fast', maxTokens: 5000, maxRetries: 2, requestId: 'lc-never' });
  await assert.rejects(chat.invoke('hi'), (err: WrappedError) => {
    assert.equal(err.status, 429);
    assert.match(err.message, /max_tokens/);
    return true;
  });
  assert.deepEqual((await recordsOf(stack, 'lc-never')).map((r) => r.status), [429], 'sent once');
});

test('a LoRA adapter name is a model ChatOpenAI can call', async () => {
  const chat = chatModel(stack.url, ALPHA_KEY, { model: 'acme-sql', maxTokens: 2, requestId: 'lc-lora' });
  const msg = await chat.invoke('select');
  assert.equal(msg.response_metadata.model_name, 'acme-sql');
  assert.equal((await recordOf(stack, 'lc-lora')).replica, 'lora-1');
});
