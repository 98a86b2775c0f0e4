// Traces from the client through the gateway to the replica, received by a real OTLP/HTTP receiver (JSON here;
// protobuf and acceptor threads in otlp-threads.test.ts): the gateway's root span continues the client's
// trace as a child of its span, carries the GenAI and expediter. attributes, has a span per stage and per
// upstream attempt (a retry shows as two, the first failed), and the replica's request carries a traceparent
// naming the attempt's span. Refused and shed requests have a short root span with the reason. Each replica
// sits behind a recording proxy, which keeps the headers the gateway sent it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { ALPHA_KEY, startStack, waitFor, type TestStack } from '../../helpers/start-gateway.ts';
import { startMockReplica, type MockReplica } from '../../helpers/mock-replicas.ts';
import { startCountingProxy, type CountingProxy } from '../../helpers/counting-proxy.ts';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../../helpers/otlp-receiver.ts';
import { setFault } from '../mock-replica/http-client.ts';
import { parseConfig } from '../../../src/config/load.ts';

const MODEL = 'llama-3.1-8b-instruct';
let receiver: OtlpReceiver;
let replicas: MockReplica[] = [];
let proxies: CountingProxy[] = [];
let stack: TestStack;

before(async () => {
  receiver = await startOtlpReceiver();
  replicas = await Promise.all([0, 1].map(() => startMockReplica({ profile: 'tiny', model: MODEL })));
  proxies = await Promise.all(replicas.map((r) => startCountingProxy(r.url)));
  stack = await startStack({
    pools: [{ id: '8b', model: MODEL, aliases: ['gpt-fast'], replicas: [] }],
    externalReplicas: { '8b': proxies.map((p) => p.url) },
    config: {
      routing: { policy: 'round-robin' },
      // A loaded machine slows the mocks' first tokens: the GPU-time model must not shed these requests.
      admission: { ttft_ms_by_tier: { standard: 10_000 } },
      // One connection per replica: admission sends a replica no more (the shed test fills both).
      upstream: { connect_timeout_ms: 1000, first_token_timeout_ms: 5000, max_attempts: 3, connections_per_replica: 1 },
      tracing: { traces_endpoint: `${receiver.url}/v1/traces`, protocol: 'http/json', service_name: 'gw-under-test', sampler: 'parentbased_always_on' },
    },
  });
});

after(async () => {
  await stack.close();
  await Promise.all([...proxies.map((p) => p.close()), ...replicas.map((r) => r.close()), receiver.close()]);
});

const hex = (n: number): string => Array.from({ length: n }, () => Math.floor(Math.random() * 16).toString(16)).join('');

async function chat(traceId: string, clientSpan: string, body: Record<string, unknown>, key = ALPHA_KEY, signal?: AbortSignal): Promise<Response> {
  const res = await fetch(`${stack.url}/v1/chat/completions`, {
    method: 'POST',
    ...(signal ? { signal } : {}),
    headers: {
      authorization: `Bearer ${key}`, 'content-type': 'application/json',
      traceparent: `00-${traceId}-${clientSpan}-01`, tracestate: 'client=7',
    },
    body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'Tell me about the weather in spring.' }], max_tokens: 8, ...body }),
  });
  await res.text();
  return res;
}

/** The spans of one trace once its root has arrived (the exporter batches: flushed on demand). */
async function traceOf(traceId: string, count: number): Promise<ReceivedSpan[]> {
  await stack.gateway.services.tracing!.flush();
  return waitFor(() => {
    const spans = receiver.spans.filter((s) => s.traceId === traceId);
    return spans.length >= count ? spans : null;
  }, 5000);
}

const only = (spans: ReceivedSpan[], name: string): ReceivedSpan => {
  const found = spans.filter((s) => s.name === name);
  assert.equal(found.length, 1, `one ${name} span in ${spans.map((s) => s.name).join(', ')}`);
  return found[0]!;
};

/** Requests the gateway has in flight at the replicas (both proxies' forwarded completions not yet answered). */
const busy = (): number => stack.gateway.inflightCount;

/** The traceparent of every completion request the replicas received, in order. */
const upstreamParents = (): string[] => proxies.flatMap((p) => p.posts.filter((r) => r.path === '/v1/chat/completions').map((r) => String(r.headers.traceparent ?? '')));

test('a streamed chat continues the client trace: root is the client span\'s child, GenAI and expediter. attributes, a span per stage, the replica gets the attempt\'s traceparent', async () => {
  const traceId = hex(32);
  const clientSpan = hex(16);
  const res = await chat(traceId, clientSpan, { stream: true, stream_options: { include_usage: true } });
  assert.equal(res.status, 200);
  // root, tokenize, quota, admit, upstream attempt, relay
  const spans = await traceOf(traceId, 6);
  const root = only(spans, `chat ${MODEL}`);
  assert.equal(root.parentSpanId, clientSpan, 'the root span is a child of the client\'s span');
  assert.equal(root.kind, 2, 'SERVER');
  assert.equal(root.traceState, 'client=7');
  assert.equal(root.resource['service.name'], 'gw-under-test');
  assert.equal(root.encoding, 'json');
  const a = root.attributes;
  assert.equal(a['gen_ai.operation.name'], 'chat');
  assert.equal(a['gen_ai.request.model'], MODEL);
  assert.equal(a['gen_ai.request.max_tokens'], 8);
  assert.ok(typeof a['gen_ai.usage.input_tokens'] === 'number' && a['gen_ai.usage.input_tokens'] > 0, 'input tokens');
  assert.equal(a['gen_ai.usage.output_tokens'], 8);
  assert.ok(typeof a['gen_ai.response.time_to_first_chunk'] === 'number' && a['gen_ai.response.time_to_first_chunk'] > 0, 'time to first token');
  assert.deepEqual(a['gen_ai.response.finish_reasons'], ['length']);
  assert.equal(a['http.response.status_code'], 200);
  assert.equal(a['expediter.tenant'], 'alpha');
  assert.equal(a['expediter.policy'], 'round-robin');
  assert.equal(a['expediter.pool'], '8b');
  assert.match(String(a['expediter.replica']), /^8b-x[12]$/);
  assert.equal(typeof a['expediter.cached_tokens.predicted'], 'number');
  assert.equal(typeof a['expediter.cached_tokens.reported'], 'number');
  assert.equal(root.status.code, 0, 'a 200 leaves the status unset');

  for (const stage of ['tokenize', 'quota', 'admit', 'upstream attempt']) assert.equal(only(spans, stage).parentSpanId, root.spanId, `${stage} is the root's child`);
  assert.equal(only(spans, 'quota').attributes['expediter.result'], 'ok');
  assert.equal(typeof only(spans, 'admit').attributes['expediter.queue_ms'], 'number');
  const attempt = only(spans, 'upstream attempt');
  assert.equal(attempt.kind, 3, 'CLIENT');
  assert.equal(attempt.attributes['expediter.attempt'], 1);
  assert.match(String(attempt.attributes['url.full']), /^http:\/\/127.0.0.1:\d+\/v1\/chat\/completions$/);
  assert.equal(attempt.attributes['expediter.replica'], a['expediter.replica']);
  assert.equal(typeof attempt.attributes['expediter.cached_blocks.predicted'], 'number');
  assert.ok(attempt.events.some((e) => e.name === 'first_token'));
  assert.equal(only(spans, 'relay').parentSpanId, attempt.spanId);

  // The replica's request names the attempt span, in the client's trace.
  assert.ok(upstreamParents().includes(`00-${traceId}-${attempt.spanId}-01`), `upstream traceparents: ${upstreamParents().join(' ')}`);
});

test('a retry shows as two attempt spans, the first failed with its reason; each replica request names its own attempt', async () => {
  // Replica 1 fails its next completion with a 500; round-robin sends it one of the next requests (a few more
  // when a loaded machine made a scrape fail and routing passed it over for a moment).
  await setFault(replicas[0]!.url, { mode: 'error_before_first_token', status: 500, count: 1 });
  const toFirst = (): number => proxies[0]!.posts.filter((r) => r.path === '/v1/chat/completions').length;
  const before = toFirst();
  let id = '';
  for (let i = 0; i < 8 && toFirst() === before; i++) {
    id = hex(32);
    assert.equal((await chat(id, hex(16), {})).status, 200);
  }
  assert.ok(toFirst() > before, 'replica 1 was tried');
  // root, tokenize, quota, two admits, two attempts
  const retried = await traceOf(id, 7);
  const attempts = retried.filter((s) => s.name === 'upstream attempt').sort((x, y) => Number(x.attributes['expediter.attempt']) - Number(y.attributes['expediter.attempt']));
  assert.equal(attempts.length, 2, 'two attempts');
  assert.equal(attempts[0]!.attributes['expediter.attempt'], 1);
  assert.equal(attempts[0]!.status.code, 2, 'the failed attempt has status ERROR');
  assert.equal(attempts[0]!.attributes['error.type'], 'status_5xx');
  assert.equal(attempts[0]!.attributes['http.response.status_code'], 500);
  assert.equal(attempts[1]!.attributes['expediter.attempt'], 2);
  assert.equal(attempts[1]!.status.code, 0);
  assert.notEqual(attempts[0]!.attributes['expediter.replica'], attempts[1]!.attributes['expediter.replica']);
  const root = retried.find((s) => s.parentSpanId !== '' && s.name === `chat ${MODEL}`)!;
  assert.equal(root.attributes['expediter.retries'], 1);
  const parents = upstreamParents();
  for (const at of attempts) assert.ok(parents.some((p) => p.includes(`-${at.spanId}-`)), `a replica request names attempt ${String(at.attributes['expediter.attempt'])}`);
});

test('a refused request (401) gets a short root span with the reason; a refused body (400) too', async () => {
  const refused = hex(32);
  assert.equal((await chat(refused, hex(16), {}, 'sk-not-a-key')).status, 401);
  const [root] = await traceOf(refused, 1);
  assert.equal(root!.name, 'chat');
  assert.equal(root!.attributes['error.type'], 'invalid_api_key');
  assert.equal(root!.attributes['http.response.status_code'], 401);
  assert.equal(root!.status.code, 0, 'a 4xx is the client\'s: status unset');
  const invalid = hex(32);
  assert.equal((await chat(invalid, hex(16), { max_tokens: -1 })).status, 400);
  const [bad] = await traceOf(invalid, 1);
  assert.equal(bad!.attributes['error.type'], 'invalid_value');
});

test('a shed request (429 server_overloaded) gets its span with the shed reason', async () => {
  // Both replicas busy with a request that hangs (one connection each: upstream.connections_per_replica 1), and
  // no admission queue: the next request is shed at arrival.
  const raw = JSON.parse(JSON.stringify(stack.cfg)) as Record<string, unknown>;
  raw.admission = { ...(raw.admission as object), max_queued_requests: 0 };
  await stack.gateway.reload(parseConfig(raw));
  for (const r of replicas) await setFault(r.url, { mode: 'hang', count: 1 });
  const completions = (p: CountingProxy): number => p.posts.filter((r) => r.path === '/v1/chat/completions').length;
  const before = proxies.map(completions);
  const hold = new AbortController();
  const held = [0, 1].map(() => chat(hex(32), hex(16), {}, ALPHA_KEY, hold.signal).catch(() => null));
  try {
    await waitFor(() => proxies.every((p, i) => completions(p) > before[i]!) && busy() === 2, 10000);
    const shed = hex(32);
    const res = await chat(shed, hex(16), {});
    assert.equal(res.status, 429);
    const spans = await traceOf(shed, 4);
    const root = only(spans, `chat ${MODEL}`);
    assert.equal(root.attributes['error.type'], 'server_overloaded');
    assert.match(String(root.attributes['expediter.shed_reason']), /^(slo_unreachable|wait_exceeds_deadline|queue_full|deadline_passed)$/);
    const admit = only(spans, 'admit');
    assert.equal(admit.attributes['expediter.result'], 'rejected');
    assert.equal(admit.attributes['expediter.shed_reason'], root.attributes['expediter.shed_reason']);
    assert.ok(!spans.some((s) => s.name === 'upstream attempt'), 'nothing was sent to a replica');
  } finally {
    hold.abort();
    await Promise.all(held);
    for (const r of replicas) await setFault(r.url, { mode: 'none' });
    await stack.gateway.reload(stack.cfg);
  }
});

test('a client trace that is not sampled exports nothing, and the replica gets the client\'s trace with the not-sampled flag', async () => {
  const traceId = hex(32);
  const res = await fetch(`${stack.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ALPHA_KEY}`, 'content-type': 'application/json', traceparent: `00-${traceId}-${hex(16)}-00` },
    body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'Say nothing.' }], max_tokens: 4 }),
  });
  assert.equal(res.status, 200);
  await res.text();
  await stack.gateway.services.tracing!.flush();
  assert.equal(receiver.spans.filter((s) => s.traceId === traceId).length, 0, 'parent-based sampling follows the client');
  assert.ok(upstreamParents().some((p) => new RegExp(`^00-${traceId}-[0-9a-f]{16}-00$`).test(p)), `upstream traceparents: ${upstreamParents().join(' ')}`);
});
