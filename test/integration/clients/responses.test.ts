// Client compatibility of POST /v1/responses: the clients that default to the Responses API or offer it, against a
// real gateway and mock replicas over loopback: the `openai` SDK's responses.create (its full coverage, including
// previous_response_id, retrieve and cancel, is test/integration/gateway/responses-api.test.ts), the AI SDK's
// `@ai-sdk/openai` default model (`openai('…')`), and LangChain's ChatOpenAI with useResponsesApi.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { openaiClient, type OpenAI } from './openai-sdk.ts';
import { generateText, openaiProvider, streamText } from './ai-sdk.ts';
import { HumanMessage, SystemMessage, chatModel } from './langchain.ts';
import {
  ALPHA_KEY, assertCancelled, engineIds, newEngineId, recordOf, replicaOf, replicaPhase, slowReplicas, startClientStack, type TestStack,
} from './client-stack.ts';

let stack: TestStack;
const rid = (id: string): Record<string, string> => ({ 'x-request-id': id });

before(async () => {
  stack = await startClientStack();
});

after(async () => {
  await stack.close();
});

test('openai responses.create streamed: text arrives while the replica is still generating; usage equals the record', async () => {
  const client = openaiClient(stack.url, ALPHA_KEY);
  await slowReplicas(stack, 5);
  try {
    const stream = await client.responses.create(
      { model: 'gpt-fast', instructions: 'Be brief.', input: 'Tell me about the sea.', max_output_tokens: 8, stream: true },
      { headers: rid('rs-oa-stream') },
    );
    // The replica's engine knows the request by its response id (as vLLM does), announced in response.created.
    let responseId = '';
    let deltas = 0;
    let phaseAtFirst: string | undefined;
    let completed: OpenAI.Responses.Response | undefined;
    for await (const ev of stream) {
      if (ev.type === 'response.created') responseId = ev.response.id;
      if (ev.type === 'response.output_text.delta' && deltas++ === 0) phaseAtFirst = replicaPhase(stack, replicaOf(stack, responseId) ?? '', responseId);
      if (ev.type === 'response.completed') completed = ev.response;
    }
    assert.equal(phaseAtFirst, 'running', 'the first text reached the client before the replica finished');
    assert.ok(deltas > 1, `${deltas} deltas`);
    const rec = await recordOf(stack, 'rs-oa-stream');
    assert.equal(completed?.usage?.input_tokens, rec.input_tokens);
    assert.equal(completed?.usage?.output_tokens, rec.output_tokens);
  } finally {
    await slowReplicas(stack, 0);
  }
});

test('@ai-sdk/openai\'s default model (the Responses API): generateText with usage equal to the record', async () => {
  const openai = openaiProvider(stack.url, ALPHA_KEY);
  const res = await generateText({ model: openai('gpt-fast'), system: 'Be brief.', prompt: 'hi', maxOutputTokens: 6, maxRetries: 0, headers: rid('rs-ai') });
  assert.ok(res.text.length > 0);
  const rec = await recordOf(stack, 'rs-ai');
  assert.equal(rec.status, 200);
  assert.equal(res.usage.inputTokens, rec.input_tokens);
  assert.equal(res.usage.outputTokens, rec.output_tokens);
});

test('@ai-sdk/openai\'s default model streamed: text in pieces, usage equal to the record', async () => {
  const openai = openaiProvider(stack.url, ALPHA_KEY);
  const result = streamText({ model: openai('gpt-fast'), prompt: 'Count to eight', maxOutputTokens: 8, maxRetries: 0, headers: rid('rs-ai-stream') });
  let parts = 0;
  for await (const d of result.textStream) if (d) parts++;
  assert.ok(parts > 1, `${parts} deltas`);
  const usage = await result.usage;
  const rec = await recordOf(stack, 'rs-ai-stream');
  assert.equal(usage.inputTokens, rec.input_tokens);
  assert.equal(usage.outputTokens, rec.output_tokens);
});

test('@ai-sdk/openai\'s default model aborted mid-stream: the gateway records a cancel and the replica aborts', async () => {
  const openai = openaiProvider(stack.url, ALPHA_KEY);
  await slowReplicas(stack, 10);
  try {
    const before = engineIds(stack);
    const ac = new AbortController();
    const result = streamText({ model: openai('gpt-fast'), prompt: 'a long story', maxOutputTokens: 1800, maxRetries: 0, abortSignal: ac.signal, headers: rid('rs-ai-abort') });
    let deltas = 0;
    for await (const part of result.fullStream) if (part.type === 'text-delta' && ++deltas === 3) ac.abort();
    const rec = await assertCancelled(stack, 'rs-ai-abort', (replica) => newEngineId(stack, replica, before));
    assert.ok(rec.output_tokens >= 3 && rec.output_tokens < 1800, `output counted up to the abort: ${rec.output_tokens}`);
  } finally {
    await slowReplicas(stack, 0);
  }
});

test('LangChain ChatOpenAI with useResponsesApi: invoke and stream, usage equal to the record', async () => {
  const chat = chatModel(stack.url, ALPHA_KEY, { model: 'gpt-fast', maxTokens: 6, requestId: 'rs-lc', useResponsesApi: true });
  const msg = await chat.invoke([new SystemMessage('Be brief.'), new HumanMessage('hi')]);
  assert.ok(msg.text.length > 0);
  const rec = await recordOf(stack, 'rs-lc');
  assert.equal(msg.usage_metadata?.input_tokens, rec.input_tokens);
  assert.equal(msg.usage_metadata?.output_tokens, rec.output_tokens);
  const streamed = chatModel(stack.url, ALPHA_KEY, { model: 'gpt-fast', maxTokens: 6, requestId: 'rs-lc-stream', useResponsesApi: true });
  let parts = 0;
  let output: number | undefined;
  for await (const chunk of await streamed.stream('Count to six')) {
    if (chunk.text) parts++;
    if (chunk.usage_metadata) output = chunk.usage_metadata.output_tokens;
  }
  assert.ok(parts > 1, `${parts} chunks`);
  assert.equal(output, (await recordOf(stack, 'rs-lc-stream')).output_tokens);
});
