// The mock's Responses API over real HTTP: the response object, the streamed event sequence ending in
// response.completed with usage, the store (retrieve, previous_response_id continuing the conversation with
// its earlier turns in the prompt), cancel of a background response, and vLLM's 404 for an unknown id.
// Response bodies are read as loose JSON (the shapes are what is under test).
/* eslint-disable @typescript-eslint/no-explicit-any */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startMockReplica, type MockReplica } from '../../helpers/mock-replicas.ts';

let replica: MockReplica;
before(async () => {
  replica = await startMockReplica({ profile: 'tiny', model: 'llama-3.1-8b-instruct' });
});
after(() => replica.close());

async function post(path: string, body: unknown): Promise<{ status: number; json: Record<string, any> }> {
  const r = await fetch(replica.url + path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: r.status, json: (await r.json()) as Record<string, any> };
}

void test('a non-streamed response: vLLM\'s object, output message text and usage with cached tokens', async () => {
  const { status, json } = await post('/v1/responses', { model: 'llama-3.1-8b-instruct', input: 'Hello there', instructions: 'Be brief.', max_output_tokens: 12 });
  assert.equal(status, 200);
  assert.match(json.id, /^resp_[0-9a-f]{32}$/);
  assert.equal(json.object, 'response');
  assert.equal(json.status, 'completed');
  assert.equal(json.instructions, 'Be brief.');
  assert.equal(json.max_output_tokens, 12);
  const msg = json.output[0];
  assert.equal(msg.type, 'message');
  assert.equal(msg.role, 'assistant');
  assert.equal(msg.content[0].type, 'output_text');
  assert.ok(msg.content[0].text.length > 0);
  const u = json.usage;
  assert.ok(u.input_tokens > 20, 'the Llama 3.1 template wraps system + user turns');
  assert.ok(u.output_tokens >= 1 && u.output_tokens <= 12);
  assert.equal(u.total_tokens, u.input_tokens + u.output_tokens);
  assert.equal(typeof u.input_tokens_details.cached_tokens, 'number');
  assert.equal(typeof u.output_tokens_details.reasoning_tokens, 'number');
});

void test('a streamed response sends vLLM\'s event sequence and ends with response.completed (no [DONE])', async () => {
  const r = await fetch(replica.url + '/v1/responses', {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'llama-3.1-8b-instruct', input: [{ role: 'user', content: [{ type: 'input_text', text: 'Stream please' }] }], stream: true, max_output_tokens: 10 }),
  });
  assert.equal(r.status, 200);
  assert.match(r.headers.get('content-type') ?? '', /text\/event-stream/);
  const text = await r.text();
  assert.ok(!text.includes('[DONE]'));
  const events = text.split('\n\n').filter((e) => e !== '').map((e) => {
    const [ev, data] = e.split('\n');
    const json = JSON.parse(data!.slice(6)) as Record<string, any>;
    assert.equal(ev, `event: ${json.type}`);
    return json;
  });
  const types = events.map((e) => e.type as string);
  const deltas = types.filter((t) => t === 'response.output_text.delta').length;
  assert.deepEqual(types, [
    'response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added',
    ...Array<string>(deltas).fill('response.output_text.delta'),
    'response.output_text.done', 'response.content_part.done', 'response.output_item.done', 'response.completed',
  ]);
  assert.deepEqual(events.map((e) => e.sequence_number), events.map((_, i) => i));
  const done = events.at(-1)!.response;
  assert.equal(done.status, 'completed');
  assert.equal(done.usage.output_tokens, deltas);
  const joined = events.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta as string).join('');
  assert.equal(done.output[0].content[0].text, joined);
  // Streamed responses are stored too.
  const got = await fetch(`${replica.url}/v1/responses/${done.id as string}`);
  assert.equal(got.status, 200);
  assert.equal(((await got.json()) as { id: string }).id, done.id);
});

void test('previous_response_id continues the stored conversation: its turns are in the new prompt', async () => {
  const first = await post('/v1/responses', { input: 'My name is Ada.', max_output_tokens: 8 });
  const alone = await post('/v1/responses', { input: 'What is my name?', max_output_tokens: 8, store: false });
  const next = await post('/v1/responses', { input: 'What is my name?', previous_response_id: first.json.id, max_output_tokens: 8 });
  assert.equal(next.status, 200);
  assert.equal(next.json.previous_response_id, first.json.id);
  // The follow-up's prompt holds the first turn (its input and its reply) as well as the new input.
  assert.ok(next.json.usage.input_tokens > alone.json.usage.input_tokens + first.json.usage.output_tokens);
  // store: false is not kept.
  assert.equal((await fetch(`${replica.url}/v1/responses/${alone.json.id as string}`)).status, 404);
});

void test('an unknown id is a 404 in vLLM\'s error shape, for create, retrieve and cancel', async () => {
  const missing = 'resp_00000000000000000000000000000000';
  for (const r of [await post('/v1/responses', { input: 'hi', previous_response_id: missing }), await post(`/v1/responses/${missing}/cancel`, {})]) {
    assert.equal(r.status, 404);
    assert.deepEqual(r.json, { error: { message: `Response with id '${missing}' not found.`, type: 'invalid_request_error', param: null, code: 404 } });
  }
  const got = await fetch(`${replica.url}/v1/responses/${missing}`);
  assert.equal(got.status, 404);
});

void test('cancel: a background response still running is cancelled (engine aborted); a finished one cannot be', async () => {
  const bg = await post('/v1/responses', { input: 'A long story', background: true, max_output_tokens: 1500 });
  assert.equal(bg.status, 200);
  assert.equal(bg.json.status, 'queued');
  const cancelled = await post(`/v1/responses/${bg.json.id as string}/cancel`, {});
  assert.equal(cancelled.status, 200);
  assert.equal(cancelled.json.status, 'cancelled');
  const after = (await (await fetch(`${replica.url}/v1/responses/${bg.json.id as string}`)).json()) as { status: string };
  assert.equal(after.status, 'cancelled');
  const state = replica.engine.snapshot();
  assert.equal(state.requests.find((q) => q.id === bg.json.id)?.state, 'aborted');

  const sync = await post('/v1/responses', { input: 'short', max_output_tokens: 4 });
  const refused = await post(`/v1/responses/${sync.json.id as string}/cancel`, {});
  assert.equal(refused.status, 400);
  assert.equal(refused.json.error.message, 'Cannot cancel a synchronous response.');
});

void test('wrong types are 400s naming the field', async () => {
  const r = await post('/v1/responses', { input: 'x', max_output_tokens: 'ten' });
  assert.equal(r.status, 400);
  assert.match(r.json.error.message, /max_output_tokens/);
  const r2 = await post('/v1/responses', { input: [{ type: 'function_call', name: 'f' }] });
  assert.equal(r2.status, 400);
});
