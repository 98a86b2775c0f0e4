// Client compatibility: the Vercel AI SDK (`generateText`, `streamText`) through `@ai-sdk/openai-compatible`
// and through `@ai-sdk/openai`'s chat model, against a real gateway and mock replicas over loopback.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { APICallError, RetryError, compatibleProvider, generateText, openaiProvider, streamText } from './ai-sdk.ts';
import {
  ALPHA_KEY, BASE_MODEL, RETRY_KEY, TINY_KEY, afterOneRetryable429, assertCancelled, dieMidStream, recordOf, recordsOf, replicaOf, replicaPhase,
  slowReplicas, startClientStack, type TestStack,
} from './client-stack.ts';

let stack: TestStack;
const rid = (id: string): Record<string, string> => ({ 'x-request-id': id });

before(async () => {
  stack = await startClientStack();
});

after(async () => {
  await stack.close();
});

test('generateText: the completion, with usage equal to the gateway\'s record', async () => {
  const ai = compatibleProvider(stack.url, ALPHA_KEY);
  const res = await generateText({ model: ai.chatModel('gpt-fast'), prompt: 'hi', maxOutputTokens: 3, maxRetries: 0, headers: rid('ai-chat') });
  assert.ok(res.text.length > 0);
  assert.equal(res.finishReason, 'length');
  const rec = await recordOf(stack, 'ai-chat');
  assert.equal(res.usage.inputTokens, rec.input_tokens);
  assert.equal(res.usage.outputTokens, rec.output_tokens);
  assert.equal(rec.output_tokens, 3);
});

test('streamText: text arrives while the replica is still generating, and the final usage equals the record', async () => {
  const ai = compatibleProvider(stack.url, ALPHA_KEY);
  await slowReplicas(stack, 5);
  try {
    const result = streamText({ model: ai.chatModel('gpt-fast'), system: 'You are terse.', prompt: 'Count to eight', maxOutputTokens: 8, maxRetries: 0, headers: rid('ai-stream') });
    const deltas: string[] = [];
    let phaseAtFirst: string | undefined;
    for await (const d of result.textStream) {
      if (deltas.length === 0) phaseAtFirst = replicaPhase(stack, replicaOf(stack, 'ai-stream') ?? '', 'ai-stream');
      deltas.push(d);
    }
    assert.equal(phaseAtFirst, 'running', 'the first text reached the client before the replica finished');
    assert.equal(deltas.length, 8, 'one delta per token');
    const usage = await result.usage;
    const rec = await recordOf(stack, 'ai-stream');
    assert.equal(usage.inputTokens, rec.input_tokens);
    assert.equal(usage.outputTokens, rec.output_tokens);
    assert.equal(await result.finishReason, 'length');
  } finally {
    await slowReplicas(stack, 0);
  }
});

test('a completion model (POST /v1/completions), generated and streamed, with usage equal to the record', async () => {
  const ai = compatibleProvider(stack.url, ALPHA_KEY);
  const res = await generateText({ model: ai.completionModel(BASE_MODEL), prompt: 'Once upon a time', maxOutputTokens: 5, maxRetries: 0, headers: rid('ai-cmpl') });
  const rec = await recordOf(stack, 'ai-cmpl');
  assert.ok(res.text.length > 0);
  assert.equal(res.usage.inputTokens, rec.input_tokens);
  assert.equal(res.usage.outputTokens, 5);
  const s = streamText({ model: ai.completionModel('gpt-fast'), prompt: 'Once upon a time', maxOutputTokens: 5, maxRetries: 0, headers: rid('ai-cmpl-stream') });
  let parts = 0;
  for await (const d of s.textStream) if (d) parts++;
  assert.equal(parts, 5);
  const usage = await s.usage;
  const srec = await recordOf(stack, 'ai-cmpl-stream');
  assert.equal(usage.inputTokens, srec.input_tokens);
  assert.equal(usage.outputTokens, srec.output_tokens);
});

test('@ai-sdk/openai\'s chat model against the gateway: generated and streamed, usage equal to the record', async () => {
  const openai = openaiProvider(stack.url, ALPHA_KEY);
  const res = await generateText({ model: openai.chat('gpt-fast'), prompt: 'hi', maxOutputTokens: 4, maxRetries: 0, headers: rid('aio-chat') });
  const rec = await recordOf(stack, 'aio-chat');
  assert.equal(res.usage.inputTokens, rec.input_tokens);
  assert.equal(res.usage.outputTokens, 4);
  const s = streamText({ model: openai.chat('gpt-fast'), prompt: 'hi', maxOutputTokens: 4, maxRetries: 0, headers: rid('aio-stream') });
  assert.ok((await s.text).length > 0);
  const usage = await s.usage;
  const srec = await recordOf(stack, 'aio-stream');
  assert.equal(usage.inputTokens, srec.input_tokens);
  assert.equal(usage.outputTokens, srec.output_tokens);
});

test('aborting streamText mid-stream: the gateway records a cancel and the replica aborts', async () => {
  const ai = compatibleProvider(stack.url, ALPHA_KEY);
  await slowReplicas(stack, 10);
  try {
    const ac = new AbortController();
    const result = streamText({ model: ai.chatModel('gpt-fast'), prompt: 'a long story', maxOutputTokens: 1800, maxRetries: 0, abortSignal: ac.signal, headers: rid('ai-abort') });
    let deltas = 0;
    let aborted = false;
    for await (const part of result.fullStream) {
      if (part.type === 'text-delta' && ++deltas === 3) ac.abort();
      if (part.type === 'abort') aborted = true;
    }
    assert.ok(aborted, 'the stream reports the abort');
    // Chunks already read off the socket may still be delivered; the stream then ends, far short of max_tokens.
    assert.ok(deltas >= 3 && deltas < 1800, `${deltas} deltas`);
    const rec = await assertCancelled(stack, 'ai-abort');
    assert.ok(rec.output_tokens >= 3 && rec.output_tokens < 1800, `output counted up to the abort: ${rec.output_tokens}`);
  } finally {
    await slowReplicas(stack, 0);
  }
});

test('a replica dying mid-stream: streamText reports the gateway\'s error event and finishes with reason error', async () => {
  const ai = compatibleProvider(stack.url, ALPHA_KEY);
  await dieMidStream(stack, 3);
  try {
    const result = streamText({
      model: ai.chatModel('gpt-fast'), prompt: 'die', maxOutputTokens: 20, maxRetries: 0, headers: rid('ai-die'),
      onError: () => undefined, // the error part is checked below; the default handler would print it
    });
    let text = '';
    const errors: unknown[] = [];
    for await (const part of result.fullStream) {
      if (part.type === 'text-delta') text += part.text;
      if (part.type === 'error') errors.push(part.error);
    }
    assert.ok(text.length > 0, 'the text before the failure was delivered');
    assert.equal(errors.length, 1);
    assert.match(JSON.stringify(errors[0]), /replica/i);
    assert.equal(await result.finishReason, 'error');
    assert.equal((await recordOf(stack, 'ai-die')).output_tokens, 3);
  } finally {
    await slowReplicas(stack, 0);
  }
});

test('errors arrive as APICallError with the status, the OpenAI error body and no retry', async () => {
  const ai = compatibleProvider(stack.url, ALPHA_KEY);
  await assert.rejects(generateText({ model: ai.chatModel('nope'), prompt: 'x', headers: rid('ai-404') }), (err: unknown) => {
    assert.ok(APICallError.isInstance(err), `got ${String(err)}`);
    assert.equal(err.statusCode, 404);
    assert.equal(err.isRetryable, false);
    assert.match(err.message, /nope/);
    assert.equal((JSON.parse(err.responseBody ?? '{}') as { error: { code: string } }).error.code, 'model_not_found');
    return true;
  });
  assert.equal((await recordsOf(stack, 'ai-404')).length, 1, 'sent once');
  const bad = compatibleProvider(stack.url, 'sk-wrong');
  await assert.rejects(generateText({ model: bad.chatModel('gpt-fast'), prompt: 'x' }), (err: unknown) => {
    assert.ok(APICallError.isInstance(err));
    assert.equal(err.statusCode, 401);
    return true;
  });
  await assert.rejects(generateText({ model: ai.chatModel('gpt-fast'), prompt: 'x', maxOutputTokens: 9000 }), (err: unknown) => {
    assert.ok(APICallError.isInstance(err));
    assert.equal(err.statusCode, 400);
    assert.match(err.responseBody ?? '', /context_length_exceeded/);
    return true;
  });
});

test('a retryable 429 (the tenant\'s one slot taken) is retried after its Retry-After and then succeeds', async () => {
  const ai = compatibleProvider(stack.url, RETRY_KEY);
  const { value, error } = await afterOneRetryable429(stack, 'ai-retry', () =>
    generateText({ model: ai.chatModel('gpt-fast'), prompt: 'again', maxOutputTokens: 1, maxRetries: 2, headers: rid('ai-retry') }));
  assert.equal(error, undefined);
  assert.ok((value?.text ?? '').length > 0);
  assert.deepEqual((await recordsOf(stack, 'ai-retry')).map((r) => r.status), [429, 200], 'refused once, then served');
});

test('the never-fits 429: the AI SDK retries every 429 by status (it does not read x-should-retry), each retry refused at once', async () => {
  // maxRetries 1 keeps this to one backoff (the SDK's fixed 2 s first delay: the 429 promises no Retry-After).
  const ai = compatibleProvider(stack.url, TINY_KEY);
  await assert.rejects(generateText({ model: ai.chatModel('gpt-fast'), prompt: 'hi', maxOutputTokens: 5000, maxRetries: 1, headers: rid('ai-never') }), (err: unknown) => {
    assert.ok(RetryError.isInstance(err), `got ${String(err)}`);
    const last = err.lastError;
    assert.ok(APICallError.isInstance(last));
    assert.equal(last.statusCode, 429);
    assert.equal(last.responseHeaders?.['x-should-retry'], 'false');
    assert.equal(last.responseHeaders?.['retry-after'], undefined);
    assert.match(last.message, /max_tokens/);
    return true;
  });
  assert.deepEqual((await recordsOf(stack, 'ai-never')).map((r) => r.status), [429, 429]);
});

test('a LoRA adapter name is a model the SDK can call', async () => {
  const ai = compatibleProvider(stack.url, ALPHA_KEY);
  const res = await generateText({ model: ai.chatModel('globex-legal'), prompt: 'a contract', maxOutputTokens: 2, maxRetries: 0, headers: rid('ai-lora') });
  assert.equal(res.response.modelId, 'globex-legal');
  assert.equal((await recordOf(stack, 'ai-lora')).replica, 'lora-2');
});
