// The Responses API through the gateway as the official `openai` SDK uses it, against three mock replica
// processes: responses.create (JSON and streamed), a chain of previous_response_id follow-ups that all land
// on the replica that stored the conversation (whose prompt the gateway counted as the replica did),
// retrieve and cancel sent to that replica, body validation, a client abort mid-stream (engine aborted,
// quota settled once, usage record cancelled), and a follow-up whose replica died (404 naming the id).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { OpenAI } from '../clients/openai-sdk.ts';
import { ALPHA_KEY, startStack, waitFor, type TestStack } from '../../helpers/start-gateway.ts';
import { spawnMockReplica, type SpawnedReplica } from '../../helpers/mock-replicas.ts';
import { openStream } from '../mock-replica/http-client.ts';

const MODEL = 'llama-3.1-8b-instruct';
let stack: TestStack;
let client: OpenAI;
const procs: SpawnedReplica[] = [];

before(async () => {
  // Started together: each process's start-up (tsx, the tokenizer) is most of this file's time.
  procs.push(...await Promise.all([0, 1, 2].map((i) => spawnMockReplica(['--profile', 'tiny', '--model', MODEL, '--seed', String(i)]))));
  stack = await startStack({
    pools: [{ id: '8b', model: MODEL, aliases: ['gpt-fast'], replicas: [] }],
    externalReplicas: { '8b': procs.map((p) => p.url) },
    config: { routing: { policy: 'round-robin' } },
  });
  client = new OpenAI({ apiKey: ALPHA_KEY, baseURL: `${stack.url}/v1`, maxRetries: 0 });
});

after(async () => {
  await stack.close();
  await Promise.all(procs.map((p) => p.kill()));
});

/** The x-gateway-route header's fields. */
function route(h: Headers): Record<string, string> {
  return Object.fromEntries((h.get('x-gateway-route') ?? '').split('; ').map((kv) => kv.split('=') as [string, string]));
}

test('responses.create: the replica\'s response, its prompt counted by the gateway as the replica counted it', async () => {
  const { data, response } = await client.responses.create({
    model: 'gpt-fast', instructions: 'Answer in one word.', input: 'What colour is the sky?', max_output_tokens: 8,
  }).withResponse();
  assert.equal(data.status, 'completed');
  assert.ok(data.output_text.length > 0);
  const usage = data.usage!;
  assert.equal(Number(route(response.headers).prompt_tokens), usage.input_tokens, 'gateway prompt count = replica input_tokens');
  const rec = await waitFor(async () => (await stack.usage()).find((r) => r.request_id === response.headers.get('x-request-id')));
  assert.equal(rec.status, 200);
  assert.equal(rec.input_tokens, usage.input_tokens);
  assert.equal(rec.output_tokens, usage.output_tokens);
  assert.equal(rec.replica, route(response.headers).replica);
});

test('responses.create with stream: true relays every event in order; TTFT and usage come from the events', async () => {
  const { data: stream, response } = await client.responses.create({
    model: MODEL, input: [{ role: 'user', content: [{ type: 'input_text', text: 'Tell me about the sea.' }] }], max_output_tokens: 12, stream: true,
  }).withResponse();
  const types: string[] = [];
  let text = '';
  let completed: OpenAI.Responses.Response | null = null;
  for await (const ev of stream) {
    types.push(ev.type);
    if (ev.type === 'response.output_text.delta') text += ev.delta;
    if (ev.type === 'response.completed') completed = ev.response;
  }
  assert.deepEqual(types.slice(0, 4), ['response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added']);
  assert.deepEqual(types.slice(-4), ['response.output_text.done', 'response.content_part.done', 'response.output_item.done', 'response.completed']);
  assert.ok(completed);
  const deltas = types.filter((t) => t === 'response.output_text.delta').length;
  assert.equal(completed.usage!.output_tokens, deltas);
  assert.equal(completed.output_text ?? text, text);
  const rec = await waitFor(async () => (await stack.usage()).find((r) => r.request_id === response.headers.get('x-request-id')));
  assert.equal(rec.status, 200);
  assert.equal(rec.output_tokens, deltas);
  assert.equal(rec.input_tokens, completed.usage!.input_tokens);
  assert.ok(rec.ttft_ms !== null && rec.ttft_ms > 0 && rec.ttft_ms <= rec.duration_ms);
  const metrics = await (await fetch(`${stack.url}/metrics`)).text();
  assert.match(metrics, /gateway_requests_total\{route="responses",pool="8b",status="200"/);
});

test('previous_response_id follow-ups all reach the replica that stored the conversation, counted with its history', async () => {
  const first = await client.responses.create({ model: MODEL, instructions: 'You are a poet.', input: 'Write a line about rain.', max_output_tokens: 6 }).withResponse();
  const owner = route(first.response.headers).replica!;
  let prev = first.data;
  let prevTokens = first.data.usage!.input_tokens;
  // Round robin alone would spread these four over all three replicas.
  for (let turn = 0; turn < 4; turn++) {
    const stream = turn % 2 === 1;
    const body = { model: MODEL, previous_response_id: prev.id, input: `And another, number ${turn}.`, max_output_tokens: 6 };
    let next: OpenAI.Responses.Response;
    let headers: Headers;
    if (stream) {
      const r = await client.responses.create({ ...body, stream: true }).withResponse();
      let done: OpenAI.Responses.Response | null = null;
      for await (const ev of r.data) if (ev.type === 'response.completed') done = ev.response;
      next = done!;
      headers = r.response.headers;
    } else {
      const r = await client.responses.create(body).withResponse();
      next = r.data;
      headers = r.response.headers;
    }
    assert.equal(route(headers).replica, owner, `turn ${turn} on the owner`);
    assert.equal(next.previous_response_id, prev.id);
    // The replica rendered instructions-less system turn + every earlier turn: the gateway's count agrees.
    assert.equal(Number(route(headers).prompt_tokens), next.usage!.input_tokens, `turn ${turn}: prompt counts agree`);
    assert.ok(next.usage!.input_tokens > prevTokens, 'the history grows');
    prevTokens = next.usage!.input_tokens;
    prev = next;
  }
});

test('retrieve and cancel go to the replica that stored the response; an unknown id is a 404 naming it', async () => {
  const made = await client.responses.create({ model: MODEL, input: 'Keep this.', max_output_tokens: 5 });
  const got = await client.responses.retrieve(made.id);
  assert.equal(got.id, made.id);
  assert.equal(got.output_text, made.output_text);
  await assert.rejects(client.responses.cancel(made.id), (err: unknown) => {
    assert.ok(err instanceof OpenAI.BadRequestError);
    assert.match(err.message, /Cannot cancel a synchronous response/);
    return true;
  });
  const missing = 'resp_0123456789abcdef0123456789abcdef';
  await assert.rejects(client.responses.retrieve(missing), (err: unknown) => {
    assert.ok(err instanceof OpenAI.NotFoundError);
    assert.equal(err.code, 'response_not_found');
    assert.match(err.message, new RegExp(missing));
    return true;
  });
  await assert.rejects(client.responses.create({ model: MODEL, input: 'hi', previous_response_id: missing }), (err: unknown) => {
    assert.ok(err instanceof OpenAI.NotFoundError);
    assert.equal(err.code, 'previous_response_not_found');
    assert.equal(err.param, 'previous_response_id');
    return true;
  });
});

test('bodies with wrong types are 400 invalid_request_error naming the field', async () => {
  const cases: Array<[Record<string, unknown>, string]> = [
    [{ model: MODEL, input: 5 }, 'input'],
    [{ model: MODEL, input: [{ role: 'wizard', content: 'x' }] }, 'input[0].role'],
    [{ model: MODEL, input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'x' }] }] }, 'input[0].content[0]'],
    [{ model: MODEL, input: 'x', max_output_tokens: 'ten' }, 'max_output_tokens'],
    [{ model: MODEL, input: 'x', instructions: 3 }, 'instructions'],
    [{ model: MODEL, input: 'x', previous_response_id: 7 }, 'previous_response_id'],
    [{ model: MODEL, input: 'x', background: true }, 'background'],
    [{ model: MODEL, input: 'x', store: 'yes' }, 'store'],
  ];
  for (const [body, param] of cases) {
    const r = await fetch(`${stack.url}/v1/responses`, { method: 'POST', headers: { authorization: `Bearer ${ALPHA_KEY}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    assert.equal(r.status, 400, JSON.stringify(body));
    const e = ((await r.json()) as { error: { type: string; param: string } }).error;
    assert.equal(e.type, 'invalid_request_error');
    assert.equal(e.param, param);
  }
});

test('a client hanging up mid-stream aborts the replica\'s work, settles quota once and leaves a cancelled record', async () => {
  const quota = stack.gateway.services.quota;
  // Both entry points are watched: the pipeline calls settleNow on a store that settles in process.
  const settle = quota.settle.bind(quota);
  const settleNow = quota.settleNow?.bind(quota);
  const settles: Array<{ id: string; reserved: number; used: number }> = [];
  quota.settle = (t, id, reserved, used) => {
    settles.push({ id, reserved, used });
    return settle(t, id, reserved, used);
  };
  if (settleNow !== undefined) {
    quota.settleNow = (t, id, reserved, used) => {
      settles.push({ id, reserved, used });
      return settleNow(t, id, reserved, used);
    };
  }
  try {
    for (const p of procs) await fetch(`${p.url}/_mock/faults`, { method: 'POST', body: JSON.stringify({ mode: 'slow', delay_ms: 20 }) });
    const s = openStream(stack.url, '/v1/responses', { model: MODEL, input: 'A very long story', max_output_tokens: 400, ignore_eos: true, stream: true },
      { authorization: `Bearer ${ALPHA_KEY}`, 'x-request-id': 'resp-abort-1' });
    await s.waitFrames(8);
    s.destroy();
    const rec = await waitFor(async () => (await stack.usage()).find((r) => r.request_id === 'resp-abort-1'), 5000);
    assert.equal(rec.cancelled, true);
    assert.equal(rec.status, 499);
    assert.ok(rec.output_tokens >= 1 && rec.output_tokens < 400, `output tokens relayed: ${rec.output_tokens}`);
    await waitFor(() => stack.gateway.inflightCount === 0, 5000);
    const mine = settles.filter((c) => c.id.startsWith('resp-abort-1.'));
    assert.equal(mine.length, 1, 'settled exactly once');
    assert.equal(mine[0]!.reserved, rec.input_tokens + 400);
    assert.equal(mine[0]!.used, rec.input_tokens + rec.output_tokens);
    // The replica's engine request was aborted, not left generating.
    const owner = procs[stack.cfg.pools[0]!.replicas.findIndex((r) => r.id === rec.replica)]!;
    await waitFor(async () => {
      const st = (await (await fetch(`${owner.url}/_mock/state`)).json()) as { running: number; aborted: number };
      return st.running === 0 && st.aborted >= 1;
    }, 3000);
  } finally {
    quota.settle = settle;
    if (settleNow !== undefined) quota.settleNow = settleNow;
    for (const p of procs) await fetch(`${p.url}/_mock/faults`, { method: 'POST', body: JSON.stringify({ mode: 'none' }) });
  }
});

test('a follow-up whose replica has died is a 404 naming the id, not a re-route', async () => {
  const made = await client.responses.create({ model: MODEL, input: 'Remember me.', max_output_tokens: 4 }).withResponse();
  const ownerId = route(made.response.headers).replica!;
  const owner = procs[stack.cfg.pools[0]!.replicas.findIndex((r) => r.id === ownerId)]!;
  await owner.kill();
  const slot = stack.gateway.registry.slotOf(ownerId);
  await waitFor(() => !stack.gateway.registry.isHealthy(slot), 5000, 20);
  await assert.rejects(client.responses.create({ model: MODEL, input: 'Still there?', previous_response_id: made.data.id }), (err: unknown) => {
    assert.ok(err instanceof OpenAI.NotFoundError);
    assert.equal(err.code, 'previous_response_not_found');
    assert.match(err.message, new RegExp(`${made.data.id}.*\\(${ownerId}\\) is down`));
    return true;
  });
  await assert.rejects(client.responses.retrieve(made.data.id), OpenAI.NotFoundError);
  // Requests without previous_response_id still work on the survivors.
  const fresh = await client.responses.create({ model: MODEL, input: 'New conversation.', max_output_tokens: 4 });
  assert.equal(fresh.status, 'completed');
});
